"""The trace writer: engine events -> JSONL, one flushed line per event, as they happen.

`TraceWriter` is an `EventSink` (a callable). Each line is a `TraceLine`: the
event's fields (timing included: timestamps live only in the trace), `seq`,
the source span of the suggestor the event names, and `time`, the wall-clock
moment the line was written (RFC 3339, UTC, read from the injected wall clock).
Listeners (the live progress display) see every event too.

`time` and every event's `timing` are the only fields that differ between
two runs of one pipeline with the same inputs and deterministic models
(`NONDETERMINISTIC_FIELDS`; `deterministic_line` drops them).

The file is opened when the writer is made (an unusable path is a `UsageError`,
before any work: a link, a device, or a file that is not a trace we wrote,
see `open_output`) and truncated: each run starts a fresh trace; or the writer is
handed a `stream` (the command line's standard error, a pipe), which it writes
but never closes. Either is written line by line as events happen (so it can be
followed while the run goes on). A write
that fails later (a full disk) closes the file, keeps every line already
written, and raises a `RunError` naming the file; `failure` keeps that error
so the runner can re-raise it when the engine swallowed it (an event emitted inside a suggestor).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, cast

from pydantic import BaseModel

from converge_dsl._files import OutputError, flush_checked, write_all
from converge_dsl._long_lines import cut_lines
from converge_dsl.clock import Clock, SystemClock, WallClock, rfc3339
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.errors import RunError

from ._documents import SpanModel

# The fields of a trace line that hold clock readings: all the rest is deterministic.
NONDETERMINISTIC_FIELDS: frozenset[str] = frozenset({"time", "timing"})


def deterministic_line(line: Mapping[str, Any]) -> dict[str, Any]:
    """A decoded trace line without its clock readings (what determinism compares)."""
    return {key: value for key, value in line.items() if key not in NONDETERMINISTIC_FIELDS}


# The most lines of a suggestor's source a trace keeps for its report.
MAX_EXCERPT_LINES = 40


def source_excerpts(spans: Mapping[str, SourceSpan], texts: Mapping[str, str]) -> dict[str, str]:
    """Suggestor -> the lines of its span (at most `MAX_EXCERPT_LINES`) in the loaded `texts`,
    each long one cut (`cut_lines`): a trace holds one excerpt a suggestor."""
    out: dict[str, str] = {}
    split: dict[str, list[str]] = {}
    for name, span in spans.items():
        text = texts.get(span.file)
        if text is None:
            continue
        lines = split.setdefault(span.file, text.splitlines())
        end = span.end_line
        # A block item ends where the next one starts: that line is not its own
        # when only indentation (or the next item's `- `) comes before the end.
        before = lines[end - 1][: span.end_column - 1] if end <= len(lines) else ""
        if end > span.line and not before.replace("-", " ").strip():
            end -= 1
        last = min(end, span.line + MAX_EXCERPT_LINES - 1, len(lines))
        out[name] = "\n".join(cut_lines(lines[span.line - 1 : last], span.column)).rstrip()
    return out


def trace_line(
    seq: int,
    data: dict[str, Any],
    span: dict[str, Any] | None,
    time: str,
    *,
    excerpts: Mapping[str, str],
    kinds: Mapping[str, str],
) -> dict[str, Any]:
    """One trace line from an event's JSON fields `data` (its `type` among them, taken
    out), the span of the suggestor it names and the wall-clock `time` it was written
    at; a `run_started` line also holds the suggestors' `excerpts` and `kinds`. The one
    layout of a line, for `--trace` and the service's event streams alike."""
    line = {"seq": seq, "type": data.pop("type"), **data, "span": span, "time": time}
    if line["type"] == "run_started":
        if excerpts:
            line["excerpts"] = excerpts
        if kinds:
            line["kinds"] = kinds
    return line


def wall_clock(clock: Clock) -> WallClock:
    """`clock` when it also tells the time of day, else the system's wall clock."""
    # What `isinstance(clock, WallClock)` answers, without the runtime protocol check:
    # about 30 us, twice a served run (its trace hub and its event sink).
    if getattr(clock, "wall", None) is not None:
        return cast(WallClock, clock)
    return SystemClock()


class TraceWriter:
    """Fan-out sink: writes JSONL (if a path is given) and calls listeners."""

    def __init__(
        self,
        spans: Mapping[str, SourceSpan],
        path: Path | None = None,
        listeners: tuple[Callable[[BaseModel], None], ...] = (),
        wall: WallClock | None = None,
        stream: IO[str] | None = None,
    ) -> None:
        self._spans = dict(spans)
        self._span_data: dict[str, dict[str, Any] | None] = {}
        self._excerpts: dict[str, str] = {}
        self._kinds: dict[str, str] = {}
        self._wall = wall or SystemClock()
        self._listeners = listeners
        self._seq = 0
        self._path = path
        self._file: IO[str] | None = None
        self.failure: RunError | None = None
        self._owned = stream is None  # a stream given (standard error) is the caller's
        if stream is not None:
            self._file = stream
        elif path is not None:
            self._file = open_output(path, "--trace", "trace file", mode="w")

    @property
    def listening(self) -> bool:
        """True when events go somewhere (a file or a listener); else the engine builds none."""
        return self._file is not None or bool(self._listeners)

    def set_spans(
        self,
        spans: Mapping[str, SourceSpan],
        texts: Mapping[str, str] | None = None,
        kinds: Mapping[str, str] | None = None,
    ) -> None:
        """Source spans by suggestor name (known once the pipeline is compiled).

        `texts` maps a source file's name (as spans give it) to the text the run
        loaded: each suggestor's excerpt is cut from it and written on the
        `run_started` line (`excerpts`), so that a report never reads a file.
        `kinds` (suggestor -> kind name) goes there too (`kinds`): the report
        draws each execution in its kind's colours.
        """
        self._spans = dict(spans)
        self._span_data = {}
        self._excerpts = source_excerpts(spans, texts or {})
        self._kinds = dict(kinds or {})

    def line(self, event: BaseModel) -> dict[str, Any]:
        data = event.model_dump(mode="json")
        suggestor = data.get("suggestor")
        data.setdefault("type", type(event).__name__)
        line = trace_line(
            self._seq,
            data,
            self.span(suggestor) if isinstance(suggestor, str) else None,
            rfc3339(self._wall.wall()),
            excerpts=self._excerpts,
            kinds=self._kinds,
        )
        self._seq += 1
        return line

    @property
    def excerpts(self) -> Mapping[str, str]:
        """Suggestor -> its source excerpt (what the `run_started` line holds)."""
        return self._excerpts

    @property
    def kinds(self) -> Mapping[str, str]:
        """Suggestor -> its kind's name (what the `run_started` line holds)."""
        return self._kinds

    def span(self, suggestor: str) -> dict[str, Any] | None:
        """The span of `suggestor` as a line holds it (made once per suggestor: every
        line of it shares the dict, which nothing changes)."""
        if suggestor not in self._span_data:
            span = SpanModel.of(self._spans.get(suggestor))
            self._span_data[suggestor] = None if span is None else span.model_dump()
        return self._span_data[suggestor]

    def __call__(self, event: BaseModel) -> None:
        if self.failure is not None:
            raise self.failure
        if self._file is not None:
            line = self.line(event)
            text = json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n"
            name = f"trace file {str(self._path)!r}"
            try:
                write_all(self._file, text, name)
                flush_checked(self._file, name)
            except OutputError as exc:
                self._fail(exc)
        for listener in self._listeners:
            listener(event)

    def _fail(self, exc: OutputError) -> None:
        self.failure = RunError(
            f"{exc.message}; the run stopped",
            hint="free space or choose another --trace path; the lines already written "
            "and the last --checkpoint are kept (continue with --resume DIR)",
            code=exc.code,
        )
        self.close()
        raise self.failure

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None and self._owned:
            with contextlib.suppress(OSError):  # every line was flushed when written
                file.close()


def is_trace_line(line: bytes) -> bool:
    """True for the first line of a trace this writer wrote (`{"seq":0,"type":...`)."""
    return line.startswith(b'{"seq":0,"type":')


def open_output(path: Path, option: str, what: str, *, mode: str) -> IO[str]:
    """Open output `path` (`mode` "w" truncates, "a" appends) through the one output opener.

    `converge_dsl._files.open_output`: no link is followed, and a path that is
    not a regular file with one link, or holds something we did not write (a
    trace for "w", a cassette for "a"), is a `UsageError` naming `option`.
    """
    from converge_dsl._files import open_output as open_checked
    from converge_dsl.models.cassette import is_cassette_line

    recognise = is_trace_line if mode == "w" else is_cassette_line
    return open_checked(path, option, what, recognise=recognise, append=mode == "a")
