"""A run's trace events as the service keeps them: numbered JSON lines, live and stored.

`EventSink` is the run's `RunSink` (docs/architecture.md §12): it makes each
event's trace line exactly as `--trace` writes it (`TraceWriter.line`), numbers
it after the events a previous attempt of the same run stored (a run resumed
after a crash goes on numbering), and hands it to its `LiveRun`. A `LiveRun`
holds the lines of the attempt in progress for the event streams, wakes the
streams waiting on it, and gives the lines not yet stored (`unstored`) to the
service, which writes them with the run's result (and in between, every
`FLUSH_LINES` lines).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel

from converge_dsl.clock import Clock, SystemClock, WallClock
from converge_dsl.runtime import RunSink, TraceWriter

if TYPE_CHECKING:
    from converge_dsl.compiler import CompiledPipeline

FLUSH_LINES = 256


class LiveRun:
    """The attempt in progress of one run: its lines, and a wake-up for the streams.

    Lines are added on the thread the run executes on; the streams wait on
    `loop`, the service's, which `add` wakes through `call_soon_threadsafe`.
    `unstored` may be called from either thread (a lock keeps it whole).
    """

    def __init__(self, first: int, loop: asyncio.AbstractEventLoop) -> None:
        self.first = first
        self.lines: list[tuple[int, str]] = []
        self.stored = 0  # how many of `lines` are in the store
        self.ended = False
        self._loop = loop
        self._lock = threading.Lock()
        self._changed = asyncio.Event()
        self._waking = False

    def add(self, seq: int, line: str) -> None:
        self.lines.append((seq, line))
        if not self._waking:  # one wake-up call for a burst of lines
            self._waking = True
            self._loop.call_soon_threadsafe(self._wake)

    def end(self) -> None:
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        self._waking = False
        self._changed.set()
        self._changed = asyncio.Event()

    def after(self, seq: int) -> list[tuple[int, str]]:
        """The lines numbered above `seq`."""
        start = max(0, seq + 1 - self.first)
        return self.lines[start:]

    async def changed(self, timeout: float) -> None:
        """Wait (at most `timeout` seconds) for a new line or the end."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def unstored(self) -> list[tuple[int, str]]:
        """The lines not yet handed to the store (marked stored now)."""
        with self._lock:
            end = len(self.lines)
            out = self.lines[self.stored : end]
            self.stored = end
            return out


class EventSink(RunSink):
    """Every event of the run, as a numbered trace line, into `live` (see the module)."""

    listens = True

    def __init__(self, live: LiveRun, on_full: Callable[[], object]) -> None:
        self._live = live
        self._on_full = on_full
        self._writer: TraceWriter | None = None
        self._seq = live.first

    def open(self, clock: Clock) -> None:
        wall = clock if isinstance(clock, WallClock) else SystemClock()
        self._writer = TraceWriter({}, None, wall=wall)

    def on_compiled(self, compiled: CompiledPipeline, sources: Mapping[str, str]) -> None:
        if self._writer is not None:
            self._writer.set_spans(compiled.spans, sources, compiled.kinds)

    def on_event(self, event: BaseModel) -> None:
        if self._writer is None:
            return
        line = self._writer.line(event)
        line["seq"] = self._seq
        self._live.add(self._seq, json.dumps(line, ensure_ascii=False, separators=(",", ":")))
        self._seq += 1
        if len(self._live.lines) - self._live.stored >= FLUSH_LINES:
            self._on_full()
