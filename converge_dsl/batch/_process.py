"""The `process` executor: worker processes, each loading the pipeline once.

For CPU-bound pipelines (solvers, large rule sets): `workers` processes
(started with `spawn`, so nothing of the parent's threads or loops is
inherited) each load and check the pipeline once in their initializer, keep
one event loop, and run one case at a time. The parent keeps two cases per
worker in flight and yields results as they finish. A batch-wide cap is one
`SharedPool` in shared memory that every worker's case meters ask. A worker
that dies (killed, out of memory) breaks the pool: it is made again, and the
cases in flight are run again, except one that was in flight at
`MAX_STRIKES` such deaths, which gets an error result.

Workers die with the batch (`_die_with_parent`): on Linux the kernel kills
a worker when the parent dies (`prctl(PR_SET_PDEATHSIG, SIGKILL)`), and on
every system a watcher thread ends it within `WATCH_S` of being orphaned. So
a batch killed with SIGKILL leaves no worker holding its standard output, and
multiprocessing's resource tracker, whose pipe the workers also hold, sees
it close and ends too.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Generator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl.clock import SystemClock
from converge_dsl.errors import ConvergeError

from ._budget import SharedPool
from ._cases import Case, CaseResult, error_result

if TYPE_CHECKING:
    from ._options import BatchOptions
    from ._outputs import CaseOutputs
    from ._pipeline import Pipeline
    from ._schedule import MeterFactory, SinkFactory

# Cases handed to the pool per worker at a time.
IN_FLIGHT_PER_WORKER = 2
# A case in flight each time a worker died this many times fails instead of being retried.
MAX_STRIKES = 2
# How often a worker checks that the batch that started it is still alive.
WATCH_S = 0.5
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9


def _die_with_parent(parent: int) -> None:
    """End this worker when process `parent` dies: a parent-death signal, and a watcher.

    The signal (Linux) is immediate; the watcher covers other systems and a
    parent that died before the signal was asked for (this process is then
    already an orphan, so it ends at once).
    """
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watcher below still ends the worker
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_S)
        os._exit(1)

    threading.Thread(target=watch, name="converge-dsl-parent-watch", daemon=True).start()


class _Worker:
    """The state of one worker process: its loaded pipeline, event loop and meter."""

    pipeline: Pipeline | None = None
    loop: asyncio.AbstractEventLoop | None = None
    meter: MeterFactory | None = None
    sinks: SinkFactory | None = None


def _start(  # noqa: PLR0917 (the pool passes initializer arguments by position)
    path: Path,
    env: Mapping[str, str],
    roots: tuple[Path, ...],
    pool: SharedPool | None,
    outputs: CaseOutputs,
    parent: int,
) -> None:
    """The worker initializer: die with `parent`, load the pipeline once (its errors fail
    every case)."""
    _die_with_parent(parent)
    from ._pipeline import load
    from ._schedule import make_meter

    clock = SystemClock()
    _Worker.loop = asyncio.new_event_loop()
    _Worker.meter = make_meter(pool, clock)
    _Worker.sinks = (lambda case: outputs.sinks(case, clock)) if outputs.any else None
    try:
        _Worker.pipeline = load(path, env=env, allow_roots=roots)
    except ConvergeError:
        _Worker.pipeline = None  # the parent loaded it first; this should not happen


def _run(case: Case, path: Path) -> CaseResult:
    """Run one case in this worker (never raises for the case's own failure)."""
    from ._schedule import run_case

    pipeline, loop = _Worker.pipeline, _Worker.loop
    if pipeline is None or loop is None:
        error = ConvergeError("the worker process could not load the pipeline")
        return error_result(case, error, path)
    return loop.run_until_complete(run_case(pipeline, case, _Worker.meter, _Worker.sinks))


def run_in_processes(
    options: BatchOptions, workers: int, todo: list[Case], spent: tuple[int, int]
) -> Generator[CaseResult, None, None]:
    """The `process` executor: check the pipeline loads here, then run `todo` in workers."""
    from ._pipeline import load

    load(options.pipeline, env=options.env, allow_roots=options.allow_roots)  # fail early
    context = multiprocessing.get_context("spawn")
    pool = None
    if options.limits.any:
        pool = SharedPool(options.limits, context)
        pool.add(spent[0], spent[1], 0, 0)
    start_args = (
        options.pipeline,
        dict(options.env),
        options.allow_roots,
        pool,
        options.outputs,
        os.getpid(),
    )
    return _results(options.pipeline, workers, todo, context, start_args)


def _results(
    path: Path, workers: int, todo: list[Case], context: Any, start_args: tuple[Any, ...]
) -> Generator[CaseResult, None, None]:
    queue = list(reversed(todo))
    strikes: dict[int, int] = {}
    while queue:
        executor = ProcessPoolExecutor(
            workers, mp_context=context, initializer=_start, initargs=start_args
        )
        try:
            yield from _through(executor, queue, workers, path, strikes)
        finally:
            executor.shutdown(wait=True, cancel_futures=True)


def _through(
    executor: ProcessPoolExecutor,
    queue: list[Case],
    workers: int,
    path: Path,
    strikes: dict[int, int],
) -> Generator[CaseResult, None, None]:
    """Run cases from `queue` (popped from its end) in `executor` until it is empty or the
    pool breaks. The cases in flight when a worker dies go back to the queue; one in
    flight at `MAX_STRIKES` breaks gets an error result instead."""
    running: dict[Future[CaseResult], Case] = {}
    while queue or running:
        while queue and len(running) < workers * IN_FLIGHT_PER_WORKER:
            case = queue.pop()
            running[executor.submit(_run, case, path)] = case
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        lost: list[Case] = []
        for future in sorted(done, key=lambda f: running[f].index):
            case = running.pop(future)
            try:
                result = future.result()
            except BrokenProcessPool:
                lost.append(case)
                continue
            yield result
        if lost:
            lost.extend(running.values())
            for case in sorted(lost, key=lambda c: -c.index):
                strikes[case.index] = strikes.get(case.index, 0) + 1
                if strikes[case.index] >= MAX_STRIKES:
                    error = ConvergeError("the worker process running this case died")
                    yield error_result(case, error, path)
                else:
                    queue.append(case)
            return
