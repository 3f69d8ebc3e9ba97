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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel

from converge_dsl.clock import Clock, SystemClock, WallClock
from converge_dsl.runtime import RunSink, TraceWriter

if TYPE_CHECKING:
    from converge_dsl.compiler import CompiledPipeline

FLUSH_LINES = 256


class LiveRun:
    """The attempt in progress of one run: its lines, and a wake-up for the streams."""

    def __init__(self, first: int) -> None:
        self.first = first
        self.lines: list[tuple[int, str]] = []
        self.stored = 0  # how many of `lines` are in the store
        self.ended = False
        self._changed = asyncio.Event()

    def add(self, seq: int, line: str) -> None:
        self.lines.append((seq, line))
        self._wake()

    def end(self) -> None:
        self.ended = True
        self._wake()

    def _wake(self) -> None:
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
        out = self.lines[self.stored :]
        self.stored = len(self.lines)
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
