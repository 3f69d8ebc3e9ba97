"""The clock port: time and sleeping are injected, never read from globals.

`SystemClock` is the real adapter; `FakeClock` is a public fake that tests (and
deterministic runs) use: its time only moves when something sleeps on it or
calls `advance`. asyncio is imported on the first sleep, not with this module:
`validate` reads clocks' types without ever starting an event loop.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; only differences are meaningful."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (never negative)."""
        ...


class SystemClock:
    """The real clock: `time.monotonic` and `asyncio.sleep`."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to. Sleeping advances it instantly."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        import asyncio

        await asyncio.sleep(0)
