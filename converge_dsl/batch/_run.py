"""`run_batch(options, on_result)`: one pipeline over a file of cases, one result line each.

The pipeline is loaded once here (an invalid pipeline fails the batch before
any case, as `converge-dsl run` would), then the executor runs the cases that
`--out` does not hold yet (`--resume`; without it `--out` starts empty):

- `local`: tasks of one event loop, `concurrency` cases at a time (`_local`);
- `process`: `concurrency` worker processes, each loading the pipeline once (`_process`);
- `ray`: async Ray actors, one per CPU of the Ray cluster, each holding the
  loaded pipeline, fed by a stream of tasks (`_ray`; the `ray` extra).

Each result line is written to `--out` (through the checked opener and
writes of `converge_dsl._files`) and flushed as its case finishes, tagged
with its `index` and the pipeline's stamp (`_cases.PipelineStamp`). Once the
pipeline is loaded and before any case runs, `--resume` refuses an `--out`
holding lines of another pipeline (`_cases.check_pipeline`, CD321), and the
cases to run are refused when they give an input the pipeline does not declare
(`_undeclared.check_cases`: CD802, each such input located at its first use, exit 3).
Only then is a torn last line of `--out` cut (`_cases.cut_torn`): a refused batch
leaves `--out` as it was.
A case that fails is a result line like any other; only a problem of the batch
itself (the pipeline, `--cases`, `--out`) raises. The batch-wide `limits` count what
earlier runs of the batch spent (`--resume`) and cap every case's usage
together (`_budget`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.errors import UsageError

from ._cases import (
    Case,
    CaseResult,
    Done,
    PipelineStamp,
    cases_in,
    cases_text,
    check_pipeline,
    check_resumable,
    cut_torn,
    read_done,
)
from ._options import EXECUTORS, BatchOptions
from ._outputs import BatchReportSink, BatchSink, FolderSink, OutLinesSink
from ._undeclared import check_cases

if TYPE_CHECKING:
    from ._pipeline import Pipeline

__all__ = ["EXECUTORS", "BatchOptions", "BatchSummary", "run_batch", "run_cases"]


@dataclass
class BatchSummary:
    """What a batch did: cases in all, skipped (already in `--out`), run, by stop reason;
    model calls, calls answered from the answer cache, tokens."""

    total: int = 0
    skipped: int = 0
    run: int = 0
    stops: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    model_calls: int = 0
    cached_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def add(self, result: CaseResult) -> None:
        self.run += 1
        self.stops[result.stop_reason] += 1
        self.failed += result.exit_code != 0
        usage = result.usage
        self.model_calls += usage["model_calls"]
        self.cached_calls += usage.get("cached_calls") or 0
        self.tokens += usage["input_tokens"] + usage["output_tokens"]

    @property
    def exit_code(self) -> int:
        """0 when every case run converged, else 1."""
        return 0 if self.failed == 0 else 1


def run_batch(
    options: BatchOptions,
    on_result: Callable[[CaseResult, BatchSummary], None] = lambda r, s: None,
    on_start: Callable[[BatchSummary], None] = lambda s: None,
) -> BatchSummary:
    """Run the batch of `options` (see the module docstring); return its summary.

    `on_start` hears the summary once the cases are known (total, skipped);
    `on_result` hears each result after its line is written.
    """
    from converge_dsl.clock import SystemClock

    if options.executor not in EXECUTORS:
        raise UsageError(
            f"unknown executor {options.executor!r}",
            hint=f"use one of {EXECUTORS}",
            code=codes.ARGUMENTS_REFUSED,
        )
    _start_fork_server(options)  # its imports run while the cases are read
    workers = options.workers()
    sinks = _sinks(options)
    text = cases_text(options.cases)
    cases = cases_in(text, options.cases)
    done = read_done(options.out, options.cases, cut=False) if options.resume else None
    if done is not None:
        check_resumable(done.ids, cases, options.out)
    todo = _cassettes(
        options, [case for case in cases if done is None or case.index not in done.ids]
    )
    summary = BatchSummary(total=len(cases), skipped=len(cases) - len(todo))
    spent = (0, 0) if done is None else (done.model_calls, done.tokens)
    clock = SystemClock()
    options.outputs.check_otel(clock)
    stamp = _Stamp(done, options)

    def loaded(pipeline: Pipeline) -> None:
        stamp.loaded(pipeline)
        check_cases(pipeline.name, pipeline.inputs, todo, text)
        if done is not None:  # every check passed: `--out` changes only now
            cut_torn(options.out, done)

    # Loads the pipeline (fails early) and hands it to `stamp`, which checks `--out`,
    # then checks the inputs of the cases to run against it, then cuts a torn last
    # line of `--out` (`--resume`).
    results = _executor(options, workers, todo, spent, loaded)
    options.outputs.make_folders()
    opened: list[BatchSink] = []
    started = time.monotonic()
    try:
        for sink in sinks:
            sink.open(clock)
            opened.append(sink)
        on_start(summary)
        for finished in results:
            result = finished
            if result.pipeline is None:  # a `process` worker stamps the lines it writes
                result = replace(result, pipeline=stamp.stamp, text=None)
            for sink in sinks:
                sink.on_case(result)
            summary.add(result)
            summary.seconds = time.monotonic() - started
            on_result(result, summary)
    finally:
        results.close()
        for sink in reversed(opened):
            sink.close()
    summary.seconds = time.monotonic() - started
    return summary


def run_cases(options: BatchOptions, cases: list[Case]) -> Generator[CaseResult, None, None]:
    """Run `cases` (made by the caller, each with its own models and budget) on the
    executor of `options` and yield each result as it finishes, with no files:
    `options.cases`, `out`, `resume` and the outputs are not read. The pipeline is
    loaded first (an invalid one raises before any case runs), then the inputs the
    cases give are checked against it: one it does not declare raises `CasesRefused`
    (CD802, each at its first use: a case's `span`), before any case runs, as
    `run --cases` does (a case with a `problem` is not checked: it cannot run).
    `options.limits` caps the cases' usage together. Close the generator to stop
    early."""
    if options.executor not in EXECUTORS:
        raise UsageError(
            f"unknown executor {options.executor!r}",
            hint=f"use one of {EXECUTORS}",
            code=codes.ARGUMENTS_REFUSED,
        )
    if cases:
        _start_fork_server(options)
    todo = _cassettes(options, cases)
    return _executor(options, options.workers(), todo, (0, 0), lambda p: _check(p, todo))


def _check(pipeline: Pipeline, cases: list[Case]) -> None:
    """What `run_cases` does with the loaded pipeline: refuse the undeclared inputs."""
    check_cases(pipeline.name, pipeline.inputs, cases)


class _Stamp:
    """The stamp of the batch's pipeline, taken when an executor has loaded it; under
    `--resume`, `--out` is checked against it then, before any case runs."""

    def __init__(self, done: Done | None, options: BatchOptions) -> None:
        self._done = done
        self._out = options.out
        self.stamp: PipelineStamp | None = None

    def loaded(self, pipeline: Pipeline) -> None:
        self.stamp = PipelineStamp.of(pipeline.name, pipeline.document.text)
        if self._done is not None:
            check_pipeline(self._done, self.stamp, self._out)


def _start_fork_server(options: BatchOptions) -> None:
    """Start the `process` executor's fork server, so that it imports what the workers
    need while the batch loads its pipeline: once, before the executor runs."""
    if options.executor == "process":
        from ._process import start_fork_server

        start_fork_server()


def _cassettes(options: BatchOptions, cases: list[Case]) -> list[Case]:
    """`cases`, checked against their cassettes (`--record DIR`, `--replay DIR`) and
    each answered from its own under `--replay` (`_cassettes`)."""
    from ._cassettes import check_cassettes, replaying

    record = options.outputs.record
    if record is not None:
        check_cassettes(
            cases, record, option="--record", replay=False, overwrite=options.outputs.overwrite
        )
    if options.replay is None:
        return cases
    check_cassettes(cases, options.replay, option="--replay", replay=True)
    return replaying(cases, options.replay)


def _sinks(options: BatchOptions) -> list[BatchSink]:
    """The batch's own sinks (`--out`, the `--report` page), checked with the folders its
    cases write into (`_outputs`) by the runtime's one same-file check."""
    from converge_dsl.runtime import check_outputs

    sinks: list[BatchSink] = [OutLinesSink(options.out, append=options.resume)]
    if options.report is not None:
        sinks.append(BatchReportSink(options.report, options.pipeline))
    folders = FolderSink(options.outputs.folders())
    reads = [(options.pipeline, "the pipeline"), (options.cases, "the --cases file")]
    check_outputs([*sinks, folders], reads)
    return sinks


def _executor(
    options: BatchOptions,
    workers: int,
    todo: list[Case],
    spent: tuple[int, int],
    loaded: Callable[[Pipeline], None],
) -> Generator[CaseResult, None, None]:
    """The results of `todo`, as the chosen executor finishes them (started already).

    Each executor loads the pipeline, then calls `loaded` with it before any case
    starts (what it raises stops the batch). `process` and `ray` start no more
    workers than there are cases to run.
    """
    if options.executor != "local":
        workers = max(1, min(workers, len(todo)))
    if options.executor == "process":
        from ._process import run_in_processes

        return run_in_processes(options, workers, todo, spent, loaded)
    if options.executor == "ray":
        from ._ray import run_on_ray

        return run_on_ray(options, workers, todo, spent, loaded)
    from ._local import run_locally

    return run_locally(options, workers, todo, spent, loaded)
