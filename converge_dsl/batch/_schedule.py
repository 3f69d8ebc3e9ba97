"""The case scheduler: cases run concurrently as tasks of one event loop.

For I/O-bound pipelines (model calls): while one case waits for its model,
the others run. `finished` yields each case's result as soon as it is done
(the batch writes it at once); `ordered` yields them in the order of the
cases, holding back at most a window of finished ones behind a slow case
(`Pipeline.run_many`). A case that fails never stops the others: its error
becomes its result (`run_case`). `drive` steps such a stream from plain
code, and `make_meter` gives the cases' usage meters a batch-wide cap.

Every executor runs its cases through this module, and so does `Pipeline`:
it sits below both and knows a loaded pipeline only as a `Prepared` (the
protocol `Pipeline` meets), so no import runs back up to `_pipeline`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from converge_dsl import codes
from converge_dsl.clock import Clock
from converge_dsl.errors import ConvergeError, UsageError

from ._budget import BatchLimits, BudgetPool, LocalPool, PooledMeter
from ._cases import Case, CaseResult, ModelOverride, cases_of, error_result

if TYPE_CHECKING:
    from types import FrameType

    from converge_dsl.engine import Budget, UsageMeter
    from converge_dsl.runtime import RunOutcome, RunSink

MeterFactory = Callable[["Budget"], "UsageMeter"]
# The sinks of one case's run (`_outputs.CaseOutputs.sinks`), made where it runs.
SinkFactory = Callable[[Case], "Sequence[RunSink]"]
__all__ = ["drive", "ordered"]

T = TypeVar("T")
# A signal handler, as `signal.signal` takes and returns it.
_Handler = Callable[[int, "FrameType | None"], Any] | int | None

# `ordered` starts a case only within this many cases (times the concurrency) of the
# first one not yet yielded, so a slow case holds back a bounded number of results.
WINDOW_FACTOR = 4


class Closes(Protocol):
    """What `drive` closes on its loop once the stream is done."""

    async def aclose(self) -> None: ...


class Prepared(Protocol):
    """What the scheduler needs of a loaded pipeline (`Pipeline` is one)."""

    @property
    def path(self) -> Path:
        """The pipeline file (where a case that cannot run is reported)."""
        ...

    async def outcome(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        meter: MeterFactory | None = None,
        sinks: Sequence[RunSink] = (),
        budget: Callable[[Budget], Budget] | None = None,
        overrides: Mapping[str, ModelOverride] | None = None,
        replay: Path | None = None,
    ) -> RunOutcome:
        """One run's outcome; `meter` makes the run's usage meter from its budget;
        `sinks` are the run's outputs; `budget` makes the run's budget from the
        pipeline's; `overrides` declares some of its models anew for this run;
        `replay` answers its models from a cassette."""
        ...

    async def aclose(self) -> None:
        """Close what the runs on the running event loop shared."""
        ...


async def run_case(
    pipeline: Prepared,
    case: Case,
    meter: MeterFactory | None = None,
    sinks: SinkFactory | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> CaseResult:
    """Run one case to its result; its failure (of any kind) is its result, never raised.

    `sinks` makes the outputs of the case's run (none without it). The case's
    `models` and `budget` apply to its run; the result holds its wall time on `clock`.
    """
    started = clock()
    out = await _run_case(pipeline, case, meter, sinks)
    if isinstance(out, CaseResult):  # the case could not run, or failed outside the engine
        return replace(out, seconds=clock() - started)
    body = out.plain
    calls = tuple(record.as_json() for record in out.cache_calls)
    return CaseResult(
        case.index, case.id, body, out.exit_code, cache_calls=calls, seconds=clock() - started
    )


async def _run_case(
    pipeline: Prepared, case: Case, meter: MeterFactory | None, sinks: SinkFactory | None
) -> RunOutcome | CaseResult:
    """The case's outcome, or the result of its failure."""
    problem = case.problem
    if problem is not None:
        if isinstance(problem, str):
            problem = UsageError(problem, code=codes.INPUT_REFUSED)
        return error_result(case, problem, pipeline.path)
    try:
        outputs = () if sinks is None else sinks(case)
        if case.models is None and case.budget is None and case.replay is None:
            out = await pipeline.outcome(case.inputs, meter=meter, sinks=outputs)
        else:
            out = await pipeline.outcome(
                case.inputs,
                meter=meter,
                sinks=outputs,
                budget=case.budget,
                overrides=case.models,
                replay=case.replay,
            )
    except ConvergeError as exc:
        return error_result(case, exc, pipeline.path)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bug in one case must not stop the batch
        error = ConvergeError(
            f"the case failed: {type(exc).__name__}: {exc}", code=codes.STOP_RUN_FAILED
        )
        return error_result(case, error, pipeline.path)
    return out


async def finished(
    pipeline: Prepared,
    cases: Iterable[Case],
    *,
    concurrency: int,
    meter: MeterFactory | None = None,
    may_start: Callable[[int], bool] | None = None,
    sinks: SinkFactory | None = None,
) -> AsyncIterator[CaseResult]:
    """Run `cases`, at most `concurrency` at once; yield each result as it finishes.

    `sinks` makes each case's outputs (`run_case`).

    With `may_start`, a case starts only once `may_start(its index)` is true
    (checked again after each result is yielded; true whenever nothing runs).
    """
    if concurrency < 1:
        raise UsageError("the concurrency must be at least 1", code=codes.API_MISUSE)
    pending = iter(cases)
    running: set[asyncio.Task[CaseResult]] = set()
    waiting: list[Case] = []
    done: asyncio.Queue[asyncio.Task[CaseResult]] = asyncio.Queue()

    def start_more() -> None:
        while len(running) < concurrency:
            case = waiting.pop() if waiting else next(pending, None)
            if case is None:
                return
            if running and may_start is not None and not may_start(case.index):
                waiting.append(case)
                return
            task = asyncio.ensure_future(run_case(pipeline, case, meter, sinks))
            task.add_done_callback(done.put_nowait)
            running.add(task)

    start_more()
    try:
        while running:
            task = await done.get()
            running.discard(task)
            yield task.result()
            start_more()
    finally:
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


async def ordered(
    pipeline: Prepared,
    cases: Iterable[tuple[int, Mapping[str, Any]] | Case],
    *,
    concurrency: int,
    meter: MeterFactory | None = None,
    sinks: SinkFactory | None = None,
) -> AsyncIterator[tuple[int, CaseResult]]:
    """Run `cases` (index, inputs) and yield (index, result) in the order of the indexes.

    A `Case` among them runs as it is (its own models, budget and cassette: an
    evaluation's configuration). Indexes are those of `enumerate`: 0, 1, 2... A case
    starts only within `WINDOW_FACTOR * concurrency` of the first result not yet
    yielded. `sinks` makes each case's outputs (`run_case`).
    """
    buffer: dict[int, CaseResult] = {}
    following = 0
    window = WINDOW_FACTOR * max(1, concurrency)
    stream = finished(
        pipeline,
        cases_of(iter(cases)),
        concurrency=concurrency,
        meter=meter,
        may_start=lambda index: index < following + window,
        sinks=sinks,
    )
    async for result in stream:
        buffer[result.index] = result
        while following in buffer:
            yield following, buffer.pop(following)
            following += 1


def make_meter(pool: BudgetPool | None, clock: Clock) -> MeterFactory | None:
    """The meter factory of a batch's cases: counted against `pool` (None: no batch cap)."""
    if pool is None:
        return None
    return lambda budget: PooledMeter(budget, pool, clock=clock)


def local_pool(limits: BatchLimits, spent: tuple[int, int]) -> LocalPool | None:
    """The batch's pool on one loop, holding what earlier runs spent (None: no cap)."""
    if not limits.any:
        return None
    pool = LocalPool(limits)
    pool.add(spent[0], spent[1], 0, 0)
    return pool


def drive(pipeline: Closes, stream: AsyncIterator[T]) -> Generator[T, None, None]:
    """Step `stream` on a private event loop, one result per `next` (closed at the end).

    `pipeline` (a loaded pipeline, or anything that holds what the stream's steps
    share on the loop, an evaluation's judges say) is closed on the loop after it.

    A Ctrl-C while a step runs cancels the step, and with it every running
    case (a cancelled case yields no result), then is raised as
    `KeyboardInterrupt` from `next`: never inside a case's task, where the loop
    would raise it again and again while the stream closes. A result that was
    complete when it came is yielded first; the interruption follows at the
    next `next`. From the first Ctrl-C until the loop is closed, any further
    Ctrl-C only cancels the step again: the stream and `pipeline` are always
    closed, and a Ctrl-C that came while they closed is raised after.
    """
    steps = _Steps()
    try:
        while True:
            try:
                yield steps.run(anext(stream))
            except StopAsyncIteration:
                break
    finally:
        steps.close(stream, pipeline)
    if steps.interrupted:  # a Ctrl-C while the stream closed
        raise KeyboardInterrupt


class _Steps:
    """An event loop that runs one awaitable at a time, a Ctrl-C cancelling it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.interrupted = False
        self._task: asyncio.Task[Any] | None = None
        self._closing = False
        self._guarded = False
        self._restore: _Handler = None

    def run(self, step: Awaitable[T], *, closing: bool = False) -> T:
        """What `step` returns; `KeyboardInterrupt` once a Ctrl-C came (see `drive`).

        `closing`: the step closes what ran, runs even after an interruption
        and is never cancelled by one.
        """
        if self.interrupted and not closing:
            raise KeyboardInterrupt
        self._guard()  # before the task exists: a Ctrl-C from now on cancels it
        self._task = task = self.loop.create_task(_awaited(step))
        try:
            return self.loop.run_until_complete(task)
        except asyncio.CancelledError:
            if self.interrupted:
                raise KeyboardInterrupt from None
            raise
        finally:
            self._task = None
            # Once interrupted, the handler stays until `close`: a Ctrl-C on the way
            # there must not cut the closing short.
            if not self.interrupted and not closing:
                self._unguard()

    def close(self, stream: AsyncIterator[Any], pipeline: Closes) -> None:
        """Close `stream`, then `pipeline`, on the loop, then the loop itself.

        What still runs is cancelled and awaited first (a step a Ctrl-C left
        running would keep the stream's generator busy); a Ctrl-C meanwhile only
        marks the interruption.
        """
        self._closing = True
        self._guard()
        loop = self.loop
        try:
            try:
                self.run(self._drain(), closing=True)
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    self.run(aclose(), closing=True)
            finally:
                try:
                    self.run(pipeline.aclose(), closing=True)
                finally:
                    try:
                        self.run(self._drain(), closing=True)
                        loop.run_until_complete(loop.shutdown_asyncgens())
                        loop.run_until_complete(loop.shutdown_default_executor())
                    finally:
                        loop.close()
        finally:
            self._unguard()

    async def _drain(self) -> None:
        """Cancel every other task of the loop and wait until each has ended."""
        left = asyncio.all_tasks(self.loop) - {asyncio.current_task(self.loop)}
        for task in left:
            task.cancel()
        if left:
            await asyncio.gather(*left, return_exceptions=True)

    def _guard(self) -> None:
        """Make a Ctrl-C cancel the running step (unless someone else handles Ctrl-C)."""
        if self._guarded or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return  # someone else handles Ctrl-C (or it is ignored)
        self._restore = signal.signal(signal.SIGINT, self._interrupt)
        self._guarded = True

    def _unguard(self) -> None:
        if self._guarded:
            self._guarded = False
            signal.signal(signal.SIGINT, self._restore)

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        # Never raises: raised here, the interruption would land inside whatever
        # runs (a case's task, the closing), leaving the stream's generator busy.
        self.interrupted = True
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to cancel
            self.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        if self._task is not None and not self._closing:
            self._task.cancel()


async def _awaited(step: Awaitable[T]) -> T:
    return await step
