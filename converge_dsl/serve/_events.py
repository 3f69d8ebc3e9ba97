"""A run's trace events as the service keeps them: numbered, compact, rendered when read.

`EventSink` is the run's `RunSink` (docs/architecture.md §12). For each event
it keeps a compact record, cheap to make on the run's thread: the wall-clock
time (read from `runtime.wall_clock`, as the trace writer reads it), the span of
the suggestor the event names (its JSON made once per pipeline, with the
`run_started` line's excerpts and kinds) and the event's own fields as JSON,
numbered after the events a previous attempt of the same run stored and every
number its streams noted sent (`RunStore.next_event`: a run resumed after a crash
goes on numbering, past the numbers of the events it lost), and hands it to its
`LiveRun`. No trace line is built then: `render(seq, record)` makes the line
exactly as `--trace` writes it (`converge_dsl.runtime.trace_line`) when someone
reads it (an event stream, the report). The store keeps the records as they are
(`RunStore.events` renders them); a line stored whole by an older server is read
as it is.

A `LiveRun` holds the records of the attempt in progress for the event
streams, wakes the streams waiting on it (only when one waits: a run nobody
follows costs no wake-up), and gives the records not yet stored (`unstored`)
to the service, which writes them with the run's result (and in between,
every `FLUSH_LINES` records, or with each checkpoint record).

A run on a worker (`--executor process|ray`) has its events made into an
`EncodedEvent` where they happen (`encode_event`, the `OneRun.encode` the
service asks with): the sink reads the same three things of it (its type,
the suggestor it names, its fields as JSON) as of the event itself, and the
engine's event objects never cross to the service.

A record is four fields joined by tabs: the time (microseconds since the epoch,
formatted as RFC 3339 when rendered; text as older servers stored it), the span (JSON
or `null`), the `run_started` line's excerpts and kinds (JSON, else empty),
and the event's fields (JSON, as `--trace` writes them, numbers JSON cannot
hold included). JSON text never holds a raw tab.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from time import time_ns
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from converge_dsl.clock import Clock, SystemClock, WallClock, rfc3339
from converge_dsl.runtime import CompiledMemo, RunSink, TraceWriter, trace_line, wall_clock

if TYPE_CHECKING:
    from converge_dsl.compiler import CompiledPipeline
    from converge_dsl.diagnostics import SourceSpan

FLUSH_LINES = 256
SEPARATOR = "\t"
_LAYOUTS_KEPT = 64  # the pipelines whose layout is kept (a service serves a few)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def event_json(event: BaseModel) -> str:
    """The event's fields as JSON text that decodes to its `model_dump(mode="json")`.

    pydantic's own JSON writer does that for a model configured to write the numbers
    JSON cannot hold as `json.dumps` does (`engine.events.JSON_CONFIG`, the engine's and
    the model calls' events), in a third of the time; any other event, or text pydantic
    cannot write (a lone surrogate), goes through `json.dumps` as the trace writes it.
    """
    to_json = _writer(type(event))
    if to_json is not None:
        try:
            return to_json(event).decode()
        except (PydanticSerializationError, UnicodeError):
            pass
    return _DUMPS(event.model_dump(mode="json"))


@functools.cache  # found once per class: a run writes some thirty events
def _writer(kind: type[BaseModel]) -> Callable[[BaseModel], bytes] | None:
    """pydantic's JSON writer of `kind`'s events when it writes them as `event_json` says
    (`JSON_CONFIG`), else None (they go through `json.dumps`)."""
    if kind.model_config.get("ser_json_inf_nan") != "constants":
        return None
    to_json: Callable[[BaseModel], bytes] = kind.__pydantic_serializer__.to_json
    return to_json


class EncodedEvent(NamedTuple):
    """What `EventSink` reads of an event, made where the event happened (`encode_event`):
    its `type` and the `suggestor` it names (each None when absent or not text) and its
    fields as `event_json` writes them."""

    type: str | None
    suggestor: str | None
    json: str


def encode_event(event: BaseModel) -> EncodedEvent:
    """`event` as an `EncodedEvent` (a worker's `OneRun.encode`)."""
    return EncodedEvent(*_read(event))


def _read(event: BaseModel) -> tuple[str | None, str | None, str]:
    """What `EventSink` reads of `event`, as `EncodedEvent` holds it (a plain tuple: the
    sink reads every event of a local run so)."""
    fields = event.__dict__  # a model's fields (no lookup that raises when one is absent)
    kind, suggestor = fields.get("type"), fields.get("suggestor")
    return (
        kind if isinstance(kind, str) else None,
        suggestor if isinstance(suggestor, str) else None,
        event_json(event),
    )


_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode


def render(seq: int, record: str) -> str:
    """The trace line (JSON text) of the event numbered `seq` kept as `record`."""
    fields = record.split(SEPARATOR, 3)
    if len(fields) != 4:  # a whole line (JSON has no raw tab), as older servers stored them
        return record
    time, span, extras, body = fields
    if time.isdigit():  # microseconds since the epoch (older servers stored the text)
        time = rfc3339(_EPOCH + timedelta(microseconds=int(time)))
    data: dict[str, Any] = json.loads(body)
    more: dict[str, Any] = json.loads(extras) if extras else {}
    line = trace_line(
        seq,
        data,
        json.loads(span),
        time,
        excerpts=more.get("excerpts", {}),
        kinds=more.get("kinds", {}),
    )
    return _DUMPS(line)


class LiveRun:
    """The attempt in progress of one run: its records, and a wake-up for the streams.

    Records are added on the thread the run executes on; the streams wait on
    `loop`, the service's, which `add` wakes through `call_soon_threadsafe`
    when a stream waits. `unstored` may be called from either thread (a lock
    keeps it whole).
    """

    def __init__(self, first: int, loop: asyncio.AbstractEventLoop) -> None:
        self.first = first
        self.records: list[tuple[int, str]] = []
        # The streams may send the numbers below it (`RunStore.mark_sent`, on `loop`).
        self.sent = first
        self.stored = 0  # how many of `records` are in the store
        self.ended = False
        # The run made its last event (`run_finished`): the pause rule of
        # docs/architecture.md, "Stopping the service".
        self.finished = False
        self.halted = False  # stopped at a checkpoint: no record is kept (`halt`)
        self.dropped = False  # something of the run was not kept once halted (`drop`)
        self._loop = loop
        self._lock = threading.Lock()
        self._changed = asyncio.Event()
        self._waking = False
        self._watched = False  # a stream waits for news

    def add(self, seq: int, record: str) -> bool:
        """Keep `record`, numbered `seq`; True when `FLUSH_LINES` or more are not stored."""
        if self.halted:
            self.dropped = True
            return False
        records = self.records
        records.append((seq, record))
        # `changed` marks the run watched before it looks at the records: either it
        # sees this one, or this sees the mark.
        if self._watched and not self._waking:  # one wake-up call for a burst
            self._waking = True
            self._loop.call_soon_threadsafe(self._wake)
        return len(records) - self.stored >= FLUSH_LINES

    def end(self) -> None:
        self.ended = True
        self._wake()

    def halt(self) -> None:
        """Keep no record from now on: the run stops at the checkpoint record just
        written, and the attempt that continues it from there gives its next events
        (`StopAtCheckpoint`; called on the run's thread). The streams are woken."""
        self.halted = True
        self._loop.call_soon_threadsafe(self._wake)

    def drop(self) -> None:
        """Something of the halted run was not kept (a journal write, `StopAtCheckpoint`):
        the end it may still reach is not its to store."""
        self.dropped = True

    def _wake(self) -> None:
        self._waking = False
        self._watched = False
        self._changed.set()
        self._changed = asyncio.Event()

    def after(self, seq: int) -> list[tuple[int, str]]:
        """The trace lines numbered above `seq`, rendered."""
        start = max(0, seq + 1 - self.first)
        return [(number, render(number, record)) for number, record in self.records[start:]]

    def pending(self) -> list[str]:
        """The trace lines not yet in the store, rendered."""
        return [render(number, record) for number, record in self.records[self.stored :]]

    async def changed(self, seq: int, timeout: float) -> None:
        """Wait (at most `timeout` seconds) for a record numbered above `seq`, or the end."""
        event = self._changed
        self._watched = True
        if self.ended or len(self.records) > seq + 1 - self.first:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def unstored(self) -> list[tuple[int, str]]:
        """The records not yet handed to the store (marked stored now)."""
        with self._lock:
            end = len(self.records)
            out = self.records[self.stored : end]
            self.stored = end
            return out


class EventSink(RunSink):
    """Every event of the run, as a numbered compact record, into `live` (see the module)."""

    listens = True

    def __init__(self, live: LiveRun, on_full: Callable[[], object]) -> None:
        self._live = live
        self._on_full = on_full
        self._wall: WallClock | None = None
        self._micros: Callable[[], int] = int
        self._seq = live.first
        self._layout = _NO_LAYOUT

    def open(self, clock: Clock) -> None:
        self._wall = wall_clock(clock)
        self._micros = _micros(self._wall)

    def on_compiled(self, compiled: CompiledPipeline, sources: Mapping[str, str]) -> None:
        self._layout = _layout_of(compiled.spans, sources, compiled.kinds)

    def on_event(self, event: BaseModel | EncodedEvent) -> None:
        if self._wall is None:
            return
        if type(event) is EncodedEvent:  # made on a worker (`encode_event`)
            kind, suggestor, body = event
        else:
            kind, suggestor, body = _read(event)  # type: ignore[arg-type]
        layout = self._layout
        # `suggestor` is text or None: None is no suggestor's name
        span = layout.spans.get(suggestor, "null")  # type: ignore[arg-type]
        extras = layout.extras if kind == "run_started" else ""
        # the record's four fields, joined by `SEPARATOR`
        full = self._live.add(self._seq, f"{self._micros()}\t{span}\t{extras}\t{body}")
        self._seq += 1
        if kind == "run_finished":
            self._live.finished = True
        if full:
            self._on_full()


def _micros(wall: WallClock) -> Callable[[], int]:
    """Microseconds since the epoch, by `wall`. The system's clock answers from
    `time.time_ns` what its `wall()` would (the same clock, floored to the microsecond)
    without making a datetime: a run's every event reads it."""
    if type(wall) is SystemClock:
        return lambda: time_ns() // 1000
    return lambda: (wall.wall() - _EPOCH) // _MICROSECOND


@dataclass(frozen=True)
class _Layout:
    """What a compiled pipeline puts on its lines: each suggestor's span (JSON) and the
    `run_started` line's excerpts and kinds (JSON, else empty)."""

    spans: Mapping[str, str]
    extras: str


_NO_LAYOUT = _Layout({}, "")


# The layouts of the pipelines seen lately (`_layout_of`).
_SEEN: CompiledMemo[_Layout] = CompiledMemo(_LAYOUTS_KEPT)


def _layout_of(
    spans: Mapping[str, SourceSpan], sources: Mapping[str, str], kinds: Mapping[str, str]
) -> _Layout:
    """The layout of a compiled pipeline's lines (`_layout`): found by identity for a
    pipeline seen lately (`CompiledMemo`), else laid out, or found, by value."""
    layout = _SEEN.find(spans, kinds, sources)
    if layout is None:
        layout = _layout(tuple(spans.items()), tuple(sources.items()), tuple(kinds.items()))
        _SEEN.keep(spans, kinds, sources, layout)
    return layout


@functools.lru_cache(maxsize=_LAYOUTS_KEPT)
def _layout(
    spans: tuple[tuple[str, SourceSpan], ...],
    sources: tuple[tuple[str, str], ...],
    kinds: tuple[tuple[str, str], ...],
) -> _Layout:
    """The layout of a pipeline's lines, made once per pipeline (every run of a served
    pipeline has the same spans, source and kinds), as `TraceWriter` lays them out."""
    writer = TraceWriter({}, None)
    writer.set_spans(dict(spans), dict(sources), dict(kinds))
    extras: dict[str, Mapping[str, str]] = {}
    if writer.excerpts:
        extras["excerpts"] = writer.excerpts
    if writer.kinds:
        extras["kinds"] = writer.kinds
    return _Layout(
        spans={name: _DUMPS(writer.span(name)) for name, _ in spans},
        extras=_DUMPS(extras) if extras else "",
    )
