"""Callbacks scheduled one after the other on the running loop, as a transport that
closes schedules its own (the pipe's, then the process's or the socket's): a test
checks that a loop runs them all before it is closed."""

from __future__ import annotations

import asyncio


def schedule_chain(ran: list[int], depth: int = 3) -> None:
    """Schedule `depth` callbacks, each by the one before, appending 1..depth to `ran`."""
    loop = asyncio.get_running_loop()

    def step(n: int) -> None:
        ran.append(n)
        if n < depth:
            loop.call_soon(step, n + 1)

    loop.call_soon(step, 1)
