"""Run outputs: every place a run writes to is a `RunSink` (docs/architecture.md §12).

A sink is told, in this order: `check()` before any work (refuse an unusable
path now), `open(clock)` before compilation (create its files), `on_compiled`
once the suggestors are compiled, `on_event` for each engine event (only when
`listens`), `on_result` with the run's outcome, and `close()` always, last.
`outputs()` names the files and folders it writes, so the run's same-file
checks are written once over the list of sinks (`_outputs.check_outputs`).
A sink whose write failed keeps the error in `failure`: the run re-raises it
when the engine swallowed it. `model` may wrap each of the run's models
(`--record`), and `tool_servers` what makes its MCP tool servers; `exchange`
hears each model call's request and answer.

The sinks of one run: the checkpoint folder (made by the assembly from the
plan, `_outputs.CheckpointSink`), then `RunOptions.sinks` in order (the
command line's: `--report` `ReportSink`, `--trace` `TraceSink`, `--record`
`RecordSink`, the live progress `ListenerSink`, the result document
`ResultSink`), then OpenTelemetry (`OtelSink`, `_telemetry`). A batch adds its
own over the case results (`converge_dsl.batch._outputs`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.errors import RunError, UsageError

from ._trace import TraceWriter, wall_clock

if TYPE_CHECKING:
    from converge_dsl.compiler import CompiledPipeline
    from converge_dsl.models.port import Model
    from converge_dsl.tools import ServerFactory

    from ._outcome import RunOutcome

Listener = Callable[[BaseModel], None]
V = TypeVar("V")


@dataclass(frozen=True)
class Output:
    """A file (or folder) a sink writes: its path, the option that named it, what it is."""

    path: Path
    option: str
    what: str


class RunSink:
    """One output of a run (see the module docstring); every hook does nothing here."""

    listens = False
    exchange: Any = None

    @property
    def failure(self) -> RunError | None:
        """The error of a write that failed (the run stops with it), else None."""
        return None

    def outputs(self) -> tuple[Output, ...]:
        return ()

    def check(self) -> None:
        """Refuse an unusable output now (`UsageError`), before any work."""

    def open(self, clock: Clock) -> None:
        """Create the files (before compilation: compiled suggestors emit events)."""

    def on_compiled(self, compiled: CompiledPipeline, sources: Mapping[str, str]) -> None:
        """The compiled pipeline (suggestor spans, models, kinds) and the texts the run
        loaded, by file name (the trace keeps its excerpts from them)."""

    def on_event(self, event: BaseModel) -> None:
        """One engine event (called only when `listens`)."""

    def model(self, name: str, model: Model) -> Model:
        """The run's model `name`, wrapped when this output needs to see its calls."""
        return model

    def tool_servers(self, factory: ServerFactory) -> ServerFactory:
        """What makes the run's MCP tool servers, wrapped when this output needs to see
        their calls (`--record`)."""
        return factory

    def on_result(self, outcome: RunOutcome) -> None:
        """The run's outcome (not called when the run raised)."""

    def close(self) -> None:
        """Release what `open` made; called however the run ended."""


class CompiledMemo(Generic[V]):
    """What a sink works out once per compiled pipeline (from `on_compiled`'s spans,
    kinds and sources), kept for the `kept` pipelines seen last. Every run of a pipeline
    compiled once hands the very same spans and kinds mappings: they are found by
    identity and the sources by equality, without hashing every span (2 against 14 us
    a run). When full, all is forgotten. Each call is one dict operation: threads may
    share a memo, at worst working a value out twice."""

    def __init__(self, kept: int) -> None:
        self._kept = kept
        self._entries: dict[
            int, tuple[Mapping[str, Any], Mapping[str, str], tuple[tuple[str, str], ...], V]
        ] = {}

    def find(
        self, spans: Mapping[str, Any], kinds: Mapping[str, str], sources: Mapping[str, str]
    ) -> V | None:
        """The value kept for this pipeline, else None."""
        entry = self._entries.get(id(spans))
        # Kept alive by the entry, `spans` cannot be another mapping at the same address.
        if entry is None or entry[0] is not spans or entry[1] is not kinds:
            return None
        return entry[3] if entry[2] == tuple(sources.items()) else None

    def keep(
        self,
        spans: Mapping[str, Any],
        kinds: Mapping[str, str],
        sources: Mapping[str, str],
        value: V,
    ) -> None:
        if len(self._entries) >= self._kept:
            self._entries.clear()
        self._entries[id(spans)] = (spans, kinds, tuple(sources.items()), value)


class ListenerSink(RunSink):
    """A callable that hears every event (the live progress display)."""

    listens = True

    def __init__(self, listener: Listener) -> None:
        self._listener = listener

    def on_event(self, event: BaseModel) -> None:
        self._listener(event)


class ResultSink(RunSink):
    """The run-result document, handed to `write` (the command line prints it)."""

    def __init__(self, write: Callable[[RunOutcome], object]) -> None:
        self._write = write

    def on_result(self, outcome: RunOutcome) -> None:
        self._write(outcome)


class TraceSink(RunSink):
    """`--trace FILE.jsonl`: every event as one flushed JSONL line (`TraceWriter`)."""

    listens = True

    def __init__(self, path: Path, option: str = "--trace", stream: IO[str] | None = None) -> None:
        self.path = path
        self._option = option
        self._stream = stream  # written instead of `path`: the caller's (standard error)
        self._writer: TraceWriter | None = None

    def outputs(self) -> tuple[Output, ...]:
        return (Output(self.path, self._option, "trace file"),)

    def open(self, clock: Clock) -> None:
        self._writer = TraceWriter({}, self.path, wall=wall_clock(clock), stream=self._stream)

    def on_compiled(self, compiled: CompiledPipeline, sources: Mapping[str, str]) -> None:
        if self._writer is not None:
            self._writer.set_spans(compiled.spans, sources, compiled.kinds)

    def on_event(self, event: BaseModel) -> None:
        if self._writer is not None:
            self._writer(event)

    @property
    def failure(self) -> RunError | None:
        return None if self._writer is None else self._writer.failure

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class ReportSink(RunSink):
    """`--report FILE.html`: the HTML report of the run's trace, written with its result.

    `trace` is the `--trace` file of the same run when there is one (its sink comes
    first); else the run is traced into a temporary file, deleted at `close`.
    `on_written` hears the report's path once it is written.
    """

    listens = True

    def __init__(
        self,
        path: Path,
        trace: Path | None = None,
        on_written: Callable[[Path], object] | None = None,
        option: str = "--report",
        stream: IO[str] | None = None,
    ) -> None:
        self.path = path
        self._stream = stream  # written instead of `path`: the caller's (standard error)
        self._option = option
        self._trace = trace
        self._on_written = on_written
        self._own: TraceSink | None = None
        self._folder: str | None = None

    def outputs(self) -> tuple[Output, ...]:
        return (Output(self.path, self._option, "report file"),)

    def check(self) -> None:
        from ._report_html import check_report_output

        if self._stream is None:
            check_report_output(self.path, self._option)

    def open(self, clock: Clock) -> None:
        if self._trace is None:
            self._folder = tempfile.mkdtemp(prefix="converge-report-")
            self._own = TraceSink(Path(self._folder) / "trace.jsonl")
            self._own.open(clock)
        self.listens = self._own is not None

    def on_compiled(self, compiled: CompiledPipeline, sources: Mapping[str, str]) -> None:
        if self._own is not None:
            self._own.on_compiled(compiled, sources)

    def on_event(self, event: BaseModel) -> None:
        if self._own is not None:
            self._own.on_event(event)

    @property
    def failure(self) -> RunError | None:
        return None if self._own is None else self._own.failure

    def on_result(self, outcome: RunOutcome) -> None:
        from ._report_html import render_report, write_report

        trace = self._trace if self._own is None else self._own.path
        if trace is not None and trace.is_file() and trace.stat().st_size:
            if self._stream is not None:
                self._write_stream(render_report(trace))
                return
            write_report(trace, self.path, self._option)
            if self._on_written is not None:
                self._on_written(self.path)

    def _write_stream(self, page: str) -> None:
        from converge_dsl._files import flush_checked, write_all

        assert self._stream is not None
        name = f"{self._option} {str(self.path)!r}"
        write_all(self._stream, page, name)
        flush_checked(self._stream, name)

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


class RecordSink(RunSink):
    """`--record CASSETTE`: every attempt of every model call of the run, in order, and
    every MCP tool server's start and calls (`converge_dsl.tools.recording`).

    The cassette starts empty: a recording already there is refused unless
    `overwrite` (`--overwrite`), since appending to it would make its replay
    answer from the older run too. One step counter numbers the events of all
    the run's models and tool servers, so a replay answers in the recorded order.
    """

    def __init__(self, path: Path, *, overwrite: bool = False) -> None:
        self.path = path
        self._overwrite = overwrite
        self._steps = itertools.count(1)

    def outputs(self) -> tuple[Output, ...]:
        return (Output(self.path, "--record", "cassette"),)

    def check(self) -> None:
        """The cassette is new, empty, or (with `overwrite`) a cassette; its folder is made."""
        from converge_dsl._files import open_output as open_checked
        from converge_dsl.models.cassette import is_cassette_line

        if self.path.parent != Path():
            with contextlib.suppress(OSError):  # a missing parent: reported by the open below
                self.path.parent.mkdir(parents=True, exist_ok=True)
        with open_checked(
            self.path, "--record", "cassette", recognise=is_cassette_line, append=True
        ) as out:
            holds = out.seek(0, os.SEEK_END) > 0
        if holds and not self._overwrite:
            raise UsageError(
                f"--record {str(self.path)!r} already holds a recording; recording onto it "
                "would mix two runs",
                hint="add --overwrite to record afresh over it, or give --record a new file",
                code=codes.OUTPUT_REFUSED,
            )
        if holds:
            open_checked(
                self.path, "--record", "cassette", recognise=is_cassette_line, append=False
            ).close()

    def model(self, name: str, model: Model) -> Model:
        from converge_dsl.models import RecordingModel

        return RecordingModel(model, self.path, append=True, name=name, steps=self._steps)

    def tool_servers(self, factory: ServerFactory) -> ServerFactory:
        from converge_dsl.tools import recording

        return recording(factory, self.path, self._steps)
