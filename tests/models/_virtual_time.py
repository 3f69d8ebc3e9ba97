"""Virtual time for the event loop: a 70 s wait on real sockets that takes no 70 s.

Every timeout of the HTTP adapters is measured on the event loop
(`asyncio.timeout`, in `ProviderClient.post` and in the network backend's
reads, writes and connects), and the loop's time is `time.monotonic()`, as is
`SystemClock`'s, which the run's deadline and the model's `timeout_s` budget
read. `virtual_time()` moves that one time forward when nothing else can
happen: its loops' selector first polls the sockets for a moment
(`GRACE_S`, real time), and when none is ready it skips the time to the next
timer, instead of sleeping until it. Sockets, httpcore, httpx and the
adapter stay real; only idle waiting is skipped, so a loopback server that
answers after `asyncio.sleep(70)` is seen 70 s later by every clock of the
run, and a timeout due before that fires first, as it would in real time.
Threads are not virtualised (a thread's real work counts as real time).
"""

from __future__ import annotations

import asyncio
import json
import re
import selectors
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from converge_dsl.models.fakeserver import FakeReply, anthropic_body, openai_body

GRACE_S = 0.02
"""Real seconds the selector waits for a socket before it skips idle time."""


class VirtualTime:
    """`time.monotonic()` plus the idle time skipped so far."""

    def __init__(self) -> None:
        self._real = time.monotonic
        self.skipped = 0.0

    def monotonic(self) -> float:
        return self._real() + self.skipped

    def skip_to(self, moment: float) -> None:
        self.skipped += max(0.0, moment - self.monotonic())


class _SkippingSelector(selectors.DefaultSelector):
    """The default selector, skipping the time to the next timer when no socket is ready."""

    def __init__(self, clock: VirtualTime) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None or timeout <= 0:  # nothing scheduled, or something ready
            return super().select(timeout)
        wake = self._clock.monotonic() + timeout
        events = super().select(min(timeout, GRACE_S))
        if not events:
            self._clock.skip_to(wake)
        return events


OnLoop = Callable[[asyncio.AbstractEventLoop], object]


class _Policy(asyncio.DefaultEventLoopPolicy):
    def __init__(self, clock: VirtualTime, on_loop: OnLoop) -> None:
        super().__init__()
        self._clock = clock
        self._on_loop = on_loop

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.SelectorEventLoop(_SkippingSelector(self._clock))
        self._on_loop(loop)
        return loop


@contextmanager
def virtual_time(on_loop: OnLoop = lambda loop: None) -> Iterator[VirtualTime]:
    """Within: new event loops (`asyncio.run`) skip idle time, and `time.monotonic` (the
    loops' and `SystemClock`'s time) counts it; `on_loop` is handed each new loop."""
    clock = VirtualTime()
    previous = asyncio.get_event_loop_policy()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "monotonic", clock.monotonic)
        asyncio.set_event_loop_policy(_Policy(clock, on_loop))
        try:
            yield clock
        finally:
            asyncio.set_event_loop_policy(previous)


class LateServer:
    """A model provider on 127.0.0.1 that answers each request `delay_s` after it arrived,
    served by the event loop it is attached to (so it waits on that loop's time).

    Both wire formats (the path says which); `arrived`, `answered` and `hung_up` are
    the `time.monotonic()` of each request's arrival, of its answer, and of its client
    giving up before the answer (closing the connection, or ending its run and loop).
    """

    def __init__(self, delay_s: float, text: str) -> None:
        self.delay_s = delay_s
        self.reply = FakeReply(text=text)
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.setblocking(False)
        self._tasks: set[asyncio.Task[None]] = set()
        self.arrived: list[float] = []
        self.answered: list[float] = []
        self.hung_up: list[float] = []

    @property
    def url(self) -> str:
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve on `loop` once it runs."""
        task = loop.create_task(self._serve())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self) -> None:
        server = await asyncio.start_server(self._handle, sock=self._socket)
        async with server:
            await server.serve_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE)
        await reader.readexactly(int(length.group(1)) if length else 0)
        self.arrived.append(time.monotonic())
        closed = asyncio.ensure_future(reader.read())  # b"" once the client hangs up
        try:
            done, _ = await asyncio.wait({closed}, timeout=self.delay_s)
        except asyncio.CancelledError:  # the run ended first: its loop is closing
            done = {closed}
        if done:
            self.hung_up.append(time.monotonic())
            writer.close()
            return
        closed.cancel()
        anthropic = b"/messages " in head.split(b"\r\n", 1)[0]
        data = json.dumps((anthropic_body if anthropic else openai_body)(self.reply)).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(data), data)
        )
        await writer.drain()
        self.answered.append(time.monotonic())
        writer.close()
