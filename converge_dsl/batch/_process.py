"""The `process` executor: worker processes, each loading the pipeline once.

For CPU-bound pipelines (solvers, large rule sets): `workers` processes run
the cases. They are started in one of three ways, by what the system has and
what the batch's process is running:

- forked from the batch itself, once the pipeline is loaded (`_forks`: on
  Linux, while the process runs one thread only, as the command line's batch
  does, and has no SQLite database open, the batch's own connection to the
  answer cache being closed first; the check is made each time a pool
  starts): a worker starts with all the batch imported, no lock of another
  thread can be copied half-held, since there is none, and no record of a
  database's file locks either. On two cores this saves the batch the wait
  for a fork server's imports, which its load does not hide (`bench/batch.py`,
  whole calls);
- else forked from multiprocessing's fork server (Linux, macOS): a fresh
  process (nothing of the batch's threads or loops is in it) that the batch
  starts first and that imports `worker_modules()` once, while the batch loads
  and checks the pipeline, so no worker imports them again. The server lives
  as long as the process that started it, so a later batch of that process
  starts its workers at once;
- else spawned right away, each importing `worker_modules()` while the
  pipeline loads.

Each is set up for the batch by `set_up_worker` (the one function that
readies a worker: one event loop, the batch's meter and outputs) and takes the
pipeline the parent loaded (a `Pipeline` pickles as its checked document with
the locked packs its validation read: neither loaded nor read again), pickled
once by the parent and sent with every chunk, unpickled by a worker only once:
a worker forked from the batch makes its own models, tool servers and answer
cache connection too, sharing no connection with the batch.

The parent hands the cases over in chunks of `CHUNK` (one round trip between
the processes per chunk, not per case), keeps two chunks per worker in flight
and yields results as their chunk finishes. A batch-wide cap is one
`SharedPool` in shared memory that every worker's case meters ask. A worker
that dies (killed, out of memory) breaks the pool: it is made again, and the
cases in flight are run again, except one that was in flight at `MAX_STRIKES`
such deaths, which gets an error result.

Workers die with the batch (`_die_with_parent`): every worker watches the
pipe multiprocessing keeps from the batch to each child it starts, which
reaches its end the moment the batch dies, and on Linux the kernel also kills
a worker when the process that started it dies (`prctl(PR_SET_PDEATHSIG,
SIGKILL)`: the batch, or the fork server). So a batch killed with SIGKILL
leaves no worker holding its standard output; the fork server ends when the
batch and its workers have (it holds the batch's output too until then), and
multiprocessing's resource tracker, whose pipe the workers also hold, sees it
close and ends too.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import multiprocessing.util
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._sqlite import open_connections
from converge_dsl.clock import SystemClock
from converge_dsl.engine import freeze_alive
from converge_dsl.errors import ConvergeError

from ._budget import SharedPool
from ._cases import Case, CaseResult, PipelineStamp, error_result

if TYPE_CHECKING:
    from ._options import BatchOptions
    from ._outputs import CaseOutputs
    from ._pipeline import Pipeline
    from ._schedule import MeterFactory, SinkFactory

# Chunks handed to the pool per worker at a time, and cases per chunk (32 rather than 8:
# a fifth less CPU of the parent per case on the scripted support-triage batch, which
# shares the cores with the workers; `bench/batch.py`).
IN_FLIGHT_PER_WORKER = 2
CHUNK = 32
# A case in flight each time a worker died this many times fails instead of being retried.
MAX_STRIKES = 2
# How often a worker checks that the batch that started it is still alive (when it was
# not started by multiprocessing, so has no pipe from the batch to watch).
WATCH_S = 0.5
# How long a pool about to fork from this process waits for threads joined a moment ago
# to be gone from `/proc/self/task` (`_forks`; seconds).
LINGER_S = 0.05
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9


def worker_modules() -> tuple[str, ...]:
    """What a worker needs before its pipeline arrives: the modules that run its cases
    (this one, the loaded pipeline, the outputs it is set up with) and the run assembly
    every run goes through, then the compile builders of the front end's own suggestor
    kinds (seed, rule, llm, tool) and the model factory (each imports the rest).

    The fork server imports them once for every worker; a spawned worker imports them
    while the batch loads the pipeline. A domain package's kind (agent, pack) is imported
    by the first case that uses it.
    """
    from converge_dsl.frontend import KINDS

    builders = (KINDS.kind(name).build for name in KINDS.names)
    modules = (
        __name__,
        f"{__package__}._pipeline",
        f"{__package__}._outputs",
        "converge_dsl.runtime._assembly",
        *(b.partition(":")[0] if isinstance(b, str) else b.__module__ for b in builders),
        "converge_dsl.models.factory",
    )
    return tuple(dict.fromkeys(modules))


def _die_with_parent(parent: int) -> None:
    """End this worker when process `parent` (the batch that started it) dies.

    A worker started by multiprocessing watches the pipe from the batch (its
    `parent_process()`), which reaches its end when the batch dies, whoever
    forked the worker; one started otherwise watches its parent's pid every
    `WATCH_S`. On Linux the kernel also kills it when the process that forked it
    dies. A batch already gone ends the worker at once.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watcher below still ends the worker
    batch = multiprocessing.parent_process()
    if batch is not None and batch.pid != parent:
        batch = None
    if not (batch.is_alive() if batch is not None else os.getppid() == parent):
        os._exit(1)

    def watch() -> None:
        if batch is not None:
            batch.join()
        else:
            while os.getppid() == parent:
                time.sleep(WATCH_S)
        os._exit(1)

    threading.Thread(target=watch, name="converge-dsl-parent-watch", daemon=True).start()


class _Worker:
    """The state of one worker process: its loaded pipeline, event loop and meter."""

    pipeline: Pipeline | None = None
    # The stamp of the lines this worker writes (`_cases.PipelineStamp`).
    stamp: PipelineStamp | None = None
    loop: asyncio.AbstractEventLoop | None = None
    meter: MeterFactory | None = None
    sinks: SinkFactory | None = None


def set_up_worker(
    pipeline: Pipeline | None,
    pool: SharedPool | None,
    outputs: CaseOutputs,
    parent: int,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Set up this worker process for the cases it will run: die with `parent`, keep
    `pipeline` (as the parent loaded and checked it, with the locked packs its
    validation read: neither loaded nor read again; None: it comes with the first
    chunk, `_run`) for the batch, on one event loop with the batch's meter (`pool`,
    its cap) and outputs. `environ` is the batch's environment, which a worker forked
    by a fork server started for an earlier batch would not have otherwise."""
    _die_with_parent(parent)
    if environ is not None and environ != os.environ:
        os.environ.clear()
        os.environ.update(environ)
    for module in worker_modules():  # forked from the fork server: imported there already
        importlib.import_module(module)
    from ._schedule import make_meter

    clock = SystemClock()
    _Worker.loop = asyncio.new_event_loop()
    _Worker.meter = make_meter(pool, clock)
    _Worker.sinks = (lambda case: outputs.sinks(case, clock)) if outputs.any else None
    if pipeline is not None:
        _keep(pipeline)


def _keep(pipeline: Pipeline) -> None:
    """Keep `pipeline` for the batch, and freeze what is alive (as the `local` executor:
    no collection scans the loaded pipeline)."""
    _Worker.pipeline = pipeline
    _Worker.stamp = PipelineStamp.of(pipeline.name, pipeline.document.text)
    # The worker's tool servers stop when it ends (multiprocessing runs no atexit hook).
    multiprocessing.util.Finalize(None, pipeline.close, exitpriority=10)
    freeze_alive()


def _run(cases: list[Case], pickled: bytes | None = None) -> list[CaseResult]:
    """Run a chunk of cases in this worker, one after the other (never raises for a
    case's own failure); `pickled` is the pipeline (unpickled by the first chunk that
    brings it). Each result holds its result line, written here, so the parent only
    copies it to `--out` (writing it there took a third of the parent's time per
    case: `bench/batch.py`, parent CPU per case)."""
    from ._schedule import run_case

    if pickled is not None and _Worker.pipeline is None:  # one pool per batch: one pipeline
        _keep(pickle.loads(pickled))
    pipeline, loop = _Worker.pipeline, _Worker.loop
    assert pipeline is not None, "the pipeline came with the worker or its chunk"
    assert loop is not None, "the worker initializer has run"
    return [
        replace(
            loop.run_until_complete(run_case(pipeline, case, _Worker.meter, _Worker.sinks)),
            pipeline=_Worker.stamp,
        ).with_line()
        for case in cases
    ]


def run_in_processes(
    options: BatchOptions,
    workers: int,
    todo: list[Case],
    spent: tuple[int, int],
    loaded: Callable[[Pipeline], None],
) -> Generator[CaseResult, None, None]:
    """The `process` executor: start spawned workers at once (they import while the
    pipeline loads here), check the pipeline loads and hand it to `loaded`, then start
    forked ones (from this process, or from the fork server the caller started:
    `start_fork_server`) and run `todo` in the workers."""
    from ._pipeline import close_answers, load

    context = _context()
    pool = None
    if options.limits.any:
        pool = SharedPool(options.limits, context)
        pool.add(spent[0], spent[1], 0, 0)
    start_args = (None, pool, options.outputs, os.getpid(), dict(options.env))
    plan = _Plan(options.pipeline, workers, context, start_args)
    # Spawned workers import while the pipeline loads; forked ones (from this process or
    # the fork server) are started after the load, with what it imported or once the
    # server's imports are done.
    spawning = context.get_start_method() == "spawn"
    executor = plan.start() if todo and spawning else None
    try:
        pipeline = load(
            options.pipeline, env=options.env, allow_roots=options.allow_roots, cache=options.cache
        )  # pickled to each worker with its cache settings: one store, one mode
        loaded(pipeline)
        pickled = pickle.dumps(pipeline, pickle.HIGHEST_PROTOCOL)
        close_answers(pipeline)  # the workers open their own: none is forked open
        if executor is None and todo:
            executor = plan.start()
    except BaseException:
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        raise
    return _results(plan, todo, pickled, executor)


def start_fork_server() -> None:
    """Start the fork server now (where the system has one and the workers will not be
    forked from this process: `_forks`), so that it imports `worker_modules()` while the
    batch reads its cases and loads its pipeline (started already: nothing)."""
    if not _forks() and _context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _forks() -> bool:
    """Whether a pool started now forks its workers from this process: on Linux, while
    the process runs one thread only (its own, or any library's: `/proc/self/task`)
    and has no SQLite database open (`converge_dsl._sqlite.open_connections`).

    A thread joined a moment ago may still be listed while it ends: with no other
    Python thread alive, the list is read again for up to `LINGER_S`."""
    if (
        not sys.platform.startswith("linux")
        or "fork" not in multiprocessing.get_all_start_methods()
        or threading.active_count() > 1
        or open_connections()  # a child would take no lock of a file the process holds
    ):
        return False
    give_up = time.monotonic() + LINGER_S
    while True:
        try:
            if len(os.listdir("/proc/self/task")) == 1:
                return True
        except OSError:
            return False
        if time.monotonic() >= give_up:
            return False
        time.sleep(0.001)


def _context() -> Any:
    """The fork server's context, importing `worker_modules()`, where the system has one;
    else `spawn` (see the module docstring): the context of a pool that does not fork
    from this process."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(worker_modules()))
    return context


@dataclass(frozen=True)
class _Plan:
    """How a batch's pools of workers are made: `path` is the pipeline (where a case
    that cannot run is reported); `start_args` are `set_up_worker`'s."""

    path: Path
    workers: int
    context: Any
    start_args: tuple[Any, ...]

    def start(self) -> ProcessPoolExecutor:
        """A pool of `workers` processes, started now (a call each makes it start them):
        forked from this process if it runs one thread only (`_forks`), else in
        `context`."""
        context = multiprocessing.get_context("fork") if _forks() else self.context
        executor = ProcessPoolExecutor(
            self.workers,
            mp_context=context,
            initializer=set_up_worker,
            initargs=self.start_args,
        )
        for _ in range(self.workers):
            executor.submit(_started)
        return executor


def _started() -> None:
    """Nothing: a call that makes a pool start one more worker."""


def _results(
    plan: _Plan, todo: list[Case], pickled: bytes, executor: ProcessPoolExecutor | None
) -> Generator[CaseResult, None, None]:
    """The results of `todo` from `executor` (started already), and from a new pool each
    time a worker dies; `pickled` is the pipeline, sent with every chunk."""
    queue = list(reversed(todo))
    strikes: dict[int, int] = {}
    try:
        while queue:
            if executor is None:
                executor = plan.start()
            try:
                yield from _through(plan, executor, queue, pickled, strikes)
            finally:
                executor.shutdown(wait=True, cancel_futures=True)
                executor = None
    finally:
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)


def _through(
    plan: _Plan,
    executor: ProcessPoolExecutor,
    queue: list[Case],
    pickled: bytes,
    strikes: dict[int, int],
) -> Generator[CaseResult, None, None]:
    """Run cases from `queue` (popped from its end) in `executor` until it is empty or the
    pool breaks. The cases in flight when a worker dies go back to the queue; one in
    flight at `MAX_STRIKES` breaks gets an error result instead."""
    running: dict[Future[list[CaseResult]], list[Case]] = {}
    workers = plan.workers
    while queue or running:
        while queue and len(running) < workers * IN_FLIGHT_PER_WORKER:
            # Smaller chunks near the end, so that every worker keeps busy.
            size = max(1, min(CHUNK, len(queue) // (workers * IN_FLIGHT_PER_WORKER)))
            chunk = [queue.pop() for _ in range(size)]
            running[executor.submit(_run, chunk, pickled)] = chunk
        done, _ = wait(running, return_when=FIRST_COMPLETED)
        lost: list[Case] = []
        for future in sorted(done, key=lambda f: running[f][0].index):
            chunk = running.pop(future)
            try:
                results = future.result()
            except BrokenProcessPool:
                lost.extend(chunk)
                continue
            yield from results
        if lost:
            lost.extend(case for chunk in running.values() for case in chunk)
            for case in sorted(lost, key=lambda c: -c.index):
                strikes[case.index] = strikes.get(case.index, 0) + 1
                if strikes[case.index] >= MAX_STRIKES:
                    error = ConvergeError(
                        "the worker process running this case died",
                        code=codes.EXECUTOR_WORKER_LOST,
                    )
                    yield error_result(case, error, plan.path)
                else:
                    queue.append(case)
            return
