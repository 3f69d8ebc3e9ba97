"""Workers that hold loaded pipelines and execute single runs (`OneRun`) as they come.

`RunWorkers` is the interface a service dispatches runs through:
`start()` (bounded; `WorkerError`, CD999, when a worker cannot start),
`submit(job, sinks, on_checkpoint) -> RunTicket`, `cancel(run)`, `close()`.
A `RunTicket`'s `future` resolves to the run's `RunEnd`; the `sinks` hear the
run's events as they happen (played back by `_one.Relayed` on a thread of the
caller's: a sink hands them on to its own loop), and `on_checkpoint` is
called each time the worker queued a checkpoint record.

- `ProcessWorkers(pipelines, database, n)`: `n` processes (`spawn`), each
  holding every pipeline (pickled as `load` checked it) and running many runs
  at once on its event loop; a run goes to the process with the fewest in
  flight. Commands go down a pipe per process; messages come back up it (a
  list per turn of the worker's loop), read by one thread per process, which
  also watches the process: when it dies, the runs it held end `lost` and a
  new process takes its place. A worker dies with the caller
  (`_process._die_with_parent`: killed by the kernel the moment the caller
  dies, on Linux), so a killed service leaves no worker writing its journals.
  `cancel` reaches the run's task at its next await.
- `RayWorkers(pipelines, database, n, address)`: `n` Ray actors (a local Ray,
  or the cluster at `address`), each holding the pipelines; a run is a
  streaming generator task on the least-loaded actor, whose items are lists
  of the run's messages, read by a thread per run. `cancel` cancels that
  task. An actor that dies ends its runs `lost`. The actors open the journals by path,
  so they must run on the machine that holds it (a local Ray, or nodes
  sharing that folder).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import functools
import itertools
import os
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.errors import ConvergeError, UsageError

from ._one import Message, OneRun, Relayed, RunEnd, execute_one, open_journals

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from converge_dsl.runtime import RunSink, SqliteJournals

    from ._pipeline import Pipeline

__all__ = [
    "ProcessWorkers",
    "RayWorkers",
    "RunTicket",
    "RunWorkers",
    "WorkerError",
    "run_workers",
]

# How long the workers may take to start (seconds).
START_S = 120.0
# How long `close` waits for a worker to end after it was asked to.
STOP_S = 5.0


class WorkerError(ConvergeError):
    """The workers cannot be used (CD999): not installed, unreachable, did not start."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(f"{codes.EXECUTOR_UNUSABLE}: {message}", hint=hint)


@dataclass
class RunTicket:
    """A run submitted to the workers: its end, once it comes."""

    run: str
    future: Future[RunEnd] = field(default_factory=Future)


class _Flight:
    """A run in flight: who plays its messages back, and its ticket."""

    def __init__(self, ticket: RunTicket, relayed: Relayed) -> None:
        self.ticket = ticket
        self.relayed = relayed

    def deliver(self, message: Message) -> bool:
        """Play `message` back; False when a sink failed (the run then ended `lost`: the
        caller cancels it where it runs)."""
        try:
            end = self.relayed.deliver(message)
        except Exception as exc:  # a sink that failed must not lose the run's end
            self.end(RunEnd("lost", message=f"a sink of the run failed: {exc!r}"))
            return False
        if end is not None:
            self.end(end)
        return True

    def end(self, end: RunEnd) -> None:
        self.relayed.close()
        if not self.ticket.future.done():
            self.ticket.future.set_result(end)


class RunWorkers(abc.ABC):
    """What a service dispatches single runs through (see the module docstring)."""

    @abc.abstractmethod
    def start(self) -> None:
        """Start the workers (bounded: `START_S`); again, nothing. `WorkerError` when
        they cannot start."""

    @abc.abstractmethod
    def submit(
        self,
        job: OneRun,
        sinks: Sequence[RunSink] = (),
        on_checkpoint: Callable[[], object] = lambda: None,
    ) -> RunTicket:
        """Run `job` on a worker; `sinks` hear its events, `on_checkpoint` each record
        (both on a thread of the workers')."""

    @abc.abstractmethod
    def cancel(self, run: str) -> None:
        """Cancel the run `run` where it runs (its ticket then ends `cancelled`)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the workers (bounded); runs in flight are left to their journals."""

    def pids(self) -> tuple[int, ...]:
        """The worker processes' ids (of this machine), for a test's look at orphans."""
        return ()


# --- processes ------------------------------------------------------------------------


class _Worker:
    """A worker process's loop, its pipe, and the runs in flight on it."""

    def __init__(
        self,
        conn: Connection,
        pipelines: Mapping[str, Pipeline],
        journals: tuple[SqliteJournals, threading.Lock],
    ) -> None:
        self.conn = conn
        self.pipelines = pipelines
        self.journals = journals
        self.loop = asyncio.new_event_loop()
        self.tasks: dict[str, asyncio.Task[None]] = {}  # by the key of each attempt
        self.runs: dict[str, asyncio.Task[None]] = {}  # by run id: its latest attempt
        self._lock = threading.Lock()
        self._pending: list[Message] = []

    def send(self, message: Message) -> None:
        """Queue `message`; the loop sends what is queued at its next turn, as one list
        (one pipe write for a burst of events)."""
        with self._lock:  # the loop and the journal's commit thread both send
            self._pending.append(message)
            if len(self._pending) == 1:
                self.loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        with self._lock:
            burst = self._pending[:]
            self._pending.clear()
        if burst:
            self.conn.send(burst)

    def on_command(self) -> None:
        try:
            command = self.conn.recv()
        except (EOFError, OSError):
            self.loop.stop()  # the caller is gone
            return
        if command[0] == "run":
            self._start(command[1], command[2])
        elif command[0] == "cancel":
            found = self.tasks.get(command[1])
            if found is not None:
                found.cancel()
        elif command[0] == "stop":
            self.loop.stop()

    def _start(self, job: OneRun, key: str) -> None:
        pipeline = self.pipelines[job.pipeline]
        run = execute_one(pipeline, job, self.send, self.journals, ident=key)
        task = self.loop.create_task(_after(self.runs.get(job.run), run, self.send, key))
        self.tasks[key] = self.runs[job.run] = task
        task.add_done_callback(functools.partial(_forget, self.tasks, key))
        task.add_done_callback(functools.partial(_forget, self.runs, job.run))


def _worker_main(
    conn: Connection, pipelines: Mapping[str, Pipeline], database: Path, parent: int
) -> None:
    """A worker process: die with `parent`, open the journals, run what the pipe says."""
    from converge_dsl.engine import freeze_alive

    from ._process import _die_with_parent

    _die_with_parent(parent)
    try:
        journals = open_journals(database)
    except ConvergeError as exc:
        conn.send(("failed", exc.message.removeprefix(f"{codes.EXECUTOR_UNUSABLE}: ")))
        return
    worker = _Worker(conn, pipelines, journals)
    worker.loop.add_reader(conn.fileno(), worker.on_command)
    freeze_alive()  # the pipelines live as long as the worker: no collection scans them
    conn.send(("ready", os.getpid()))
    try:
        worker.loop.run_forever()
    finally:
        journals[0].close()
        for pipeline in pipelines.values():
            pipeline.close()


async def _after(
    previous: asyncio.Task[None] | None,
    run: Coroutine[Any, Any, None],
    send: Callable[[Message], None],
    key: str,
) -> None:
    """`run`, once the `previous` attempt of the same run (abandoned, being cancelled)
    has ended: one attempt at a time holds a run's journal."""
    if previous is not None and not previous.done():
        try:
            await asyncio.wait({previous})
        except asyncio.CancelledError:
            run.close()
            send(("end", key, RunEnd("cancelled")))
            raise
    await run


def _forget(tasks: dict[str, asyncio.Task[None]], key: str, task: asyncio.Task[None]) -> None:
    if tasks.get(key) is task:
        del tasks[key]
    if not task.cancelled():
        task.exception()  # retrieved: the end was sent, nothing more to report


class _Process:
    """One worker process seen from the caller: its pipe, its runs, its reader."""

    def __init__(self, context: Any, args: tuple[Any, ...]) -> None:
        here, there = context.Pipe(duplex=True)
        self.conn: Connection = here
        self.process = context.Process(
            target=_worker_main, args=(there, *args), name="converge-serve-worker", daemon=True
        )
        self.process.start()
        there.close()
        self.flights: dict[str, _Flight] = {}
        self.lock = threading.Lock()
        self.alive = False

    def send(self, command: tuple[Any, ...]) -> bool:
        with self.lock:
            try:
                self.conn.send(command)
                return True
            except (OSError, ValueError):
                return False


class ProcessWorkers(RunWorkers):
    """`n` worker processes (see the module docstring)."""

    def __init__(self, pipelines: Mapping[str, Pipeline], database: Path, n: int) -> None:
        import multiprocessing

        self._context = multiprocessing.get_context("spawn")
        self._args = (dict(pipelines), database, os.getpid())
        self._n = max(1, n)
        self._slots: list[_Process] = []
        # Where each run in flight is: its process and the key its messages carry.
        self._where: dict[str, tuple[_Process, str]] = {}
        self._keys = itertools.count()
        self._lock = threading.Lock()
        self._closing = False
        # Runs submitted while every process was being started again, and how many are.
        self._pending: list[tuple[OneRun, _Flight]] = []
        self._restarting = 0

    def start(self) -> None:
        if self._slots:
            return  # started already
        started = [_Process(self._context, self._args) for _ in range(self._n)]
        self._slots = started
        try:
            for slot in started:
                self._wait_ready(slot)
        except WorkerError:
            self.close()
            raise
        for index, slot in enumerate(started):
            self._read(index, slot)

    def _wait_ready(self, slot: _Process) -> None:
        from multiprocessing.connection import wait

        ready = wait([slot.conn, slot.process.sentinel], timeout=START_S)
        if slot.conn in ready:
            try:
                message = slot.conn.recv()
            except (EOFError, OSError):
                message = ("failed", "it ended before it was ready")
            if message[0] == "ready":
                slot.alive = True
                return
            why = str(message[1])
        elif ready:
            why = f"it ended with exit code {slot.process.exitcode}"
        else:
            why = f"it was not ready within {START_S:.0f} seconds"
        raise WorkerError(
            f"a worker process could not start: {why}",
            hint="check that the pipelines load with `converge-dsl validate` and that the "
            "--state folder is writable, or serve with --executor local",
        )

    def _read(self, index: int, slot: _Process) -> None:
        thread = threading.Thread(
            target=self._reader, args=(index, slot), name=f"converge-worker-{index}", daemon=True
        )
        thread.start()

    def _reader(self, index: int, slot: _Process | None) -> None:
        """Deliver the messages of the process in slot `index` until it dies; then end
        its runs `lost` and start another in its place."""
        while slot is not None:
            self._pump(slot)
            slot = self._replace(index)

    def _pump(self, slot: _Process) -> None:
        from multiprocessing.connection import wait

        while True:
            ready = wait([slot.conn, slot.process.sentinel])
            if slot.conn in ready:
                try:
                    burst: list[Message] = slot.conn.recv()
                except (EOFError, OSError):
                    break
                for message in burst:
                    key = message[1]
                    flight = slot.flights.get(key)
                    if flight is None:
                        continue  # a run abandoned after a sink failed
                    if not flight.deliver(message):
                        slot.send(("cancel", key))
                        self._done(slot, key)
                    elif message[0] == "end":
                        self._done(slot, key)
                continue
            break
        slot.alive = False
        slot.process.join(STOP_S)
        with self._lock:
            lost = list(slot.flights.values())
            slot.flights.clear()
            for run, (where, _) in list(self._where.items()):
                if where is slot:
                    del self._where[run]
            self._restarting += 1  # before the runs end: queued again, they wait for it
        why = f"the worker process running it died (exit code {slot.process.exitcode})"
        for flight in lost:
            flight.end(RunEnd("lost", message=why))
        slot.conn.close()

    def _replace(self, index: int) -> _Process | None:
        """A new process in slot `index`, whose process died (None when closing, or when
        it cannot start: the slot stays dead, runs go to the others or end lost); then
        the runs that waited for it are sent."""
        replacement: _Process | None = None
        if not self._closing:
            replacement = _Process(self._context, self._args)
            try:
                self._wait_ready(replacement)
            except WorkerError:
                replacement.process.kill()
                replacement = None
        with self._lock:
            self._restarting -= 1
            if replacement is not None:
                self._slots[index] = replacement
            pending, self._pending = self._pending, []
        for job, flight in pending:  # to the new process, or lost when none is left
            self._dispatch(job, flight)
        if replacement is not None and self._closing:
            replacement.send(("stop",))
            return None
        return replacement

    def _done(self, slot: _Process, key: str) -> None:
        with self._lock:
            flight = slot.flights.pop(key, None)
            run = None if flight is None else flight.ticket.run
            if run is not None and self._where.get(run) == (slot, key):
                del self._where[run]

    def submit(
        self,
        job: OneRun,
        sinks: Sequence[RunSink] = (),
        on_checkpoint: Callable[[], object] = lambda: None,
    ) -> RunTicket:
        ticket = RunTicket(job.run)
        self._dispatch(job, _Flight(ticket, Relayed(sinks, on_checkpoint)))
        return ticket

    def _dispatch(self, job: OneRun, flight: _Flight) -> None:
        """Send `job` to the process with the fewest runs; keep it while every process is
        being started again; end it lost when none can run it."""
        with self._lock:
            alive = [slot for slot in self._slots if slot.alive]
            if not alive:
                if self._restarting and not self._closing:
                    self._pending.append((job, flight))
                    return
                flight.end(RunEnd("lost", message="no worker process is running"))
                return
            slot = min(alive, key=lambda s: len(s.flights))
            key = f"{job.run}:{next(self._keys)}"  # this attempt's messages, not a later one's
            slot.flights[key] = flight
            self._where[job.run] = (slot, key)
        if not slot.send(("run", job, key)):
            self._done(slot, key)
            flight.end(RunEnd("lost", message="the worker process could not be reached"))

    def cancel(self, run: str) -> None:
        with self._lock:
            where = self._where.get(run)
            waiting = [item for item in self._pending if item[0].run == run]
            self._pending = [item for item in self._pending if item[0].run != run]
        for _, flight in waiting:
            flight.end(RunEnd("cancelled"))
        if where is not None:
            where[0].send(("cancel", where[1]))

    def close(self) -> None:
        """Ask every worker to stop, wait (bounded), then kill what is left."""
        self._closing = True
        with self._lock:
            slots = list(self._slots)
        for slot in slots:
            slot.send(("stop",))
        for slot in slots:
            slot.process.join(STOP_S)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(STOP_S)

    def pids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(s.process.pid for s in self._slots if s.process.pid is not None)


# --- Ray ------------------------------------------------------------------------------


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise WorkerError(
            "--executor ray needs Ray, which is not installed",
            hint="pip install 'converge-dsl[ray]', or serve with --executor process",
        ) from None
    return ray


class _RunActor:
    """A Ray actor's state: the pipelines, loaded once, and its journals' connection."""

    def __init__(self, pipelines: Mapping[str, Pipeline], database: Path) -> None:
        self._pipelines = dict(pipelines)
        self._journals = open_journals(database)

    def ready(self) -> int:
        return os.getpid()

    async def run(self, job: OneRun) -> Any:
        """The run's messages, as they happen (a streaming generator task)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Message] = asyncio.Queue()

        def send(message: Message) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, message)

        pipeline = self._pipelines[job.pipeline]
        task = asyncio.ensure_future(execute_one(pipeline, job, send, self._journals))
        try:
            while True:
                burst = [await queue.get()]
                while not queue.empty():  # one streamed item for a burst of events
                    burst.append(queue.get_nowait())
                yield burst
                if burst[-1][0] == "end":
                    break
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task


class RayWorkers(RunWorkers):
    """`n` Ray actors (see the module docstring)."""

    def __init__(
        self, pipelines: Mapping[str, Pipeline], database: Path, n: int, address: str | None
    ) -> None:
        self._pipelines = dict(pipelines)
        self._database = database
        self._n = max(1, n)
        self._address = address
        self._actors: list[Any] = []
        self._load: list[int] = []
        self._refs: dict[str, tuple[Any, int]] = {}
        self._lock = threading.Lock()
        self._started_here = False

    def start(self) -> None:
        if self._actors:
            return  # started already
        ray = _ray()
        if not ray.is_initialized():
            _reachable(self._address)
            try:
                ray.init(
                    address=self._address,
                    logging_level="ERROR",
                    log_to_driver=False,
                    include_dashboard=False,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise WorkerError(
                    f"cannot join the Ray cluster at {self._address or 'a new local Ray'}: {exc}",
                    hint="check --ray-address (ray://HOST:PORT or HOST:PORT of a running "
                    "cluster), or leave it out to start a local Ray",
                ) from None
            self._started_here = True
        actor = ray.remote(num_cpus=0)(_RunActor)
        self._actors = [actor.remote(self._pipelines, self._database) for _ in range(self._n)]
        self._load = [0] * self._n
        try:
            ray.get([a.ready.remote() for a in self._actors], timeout=START_S)
        except Exception as exc:
            self.close()
            raise WorkerError(
                f"a Ray actor could not start: {exc}",
                hint="check that the pipelines and the --state folder are readable where "
                "the actors run, or serve with --executor process",
            ) from None

    def submit(
        self,
        job: OneRun,
        sinks: Sequence[RunSink] = (),
        on_checkpoint: Callable[[], object] = lambda: None,
    ) -> RunTicket:
        ticket = RunTicket(job.run)
        flight = _Flight(ticket, Relayed(sinks, on_checkpoint))
        with self._lock:
            slot = min(range(len(self._actors)), key=self._load.__getitem__)
            self._load[slot] += 1
            ref = self._actors[slot].run.options(num_returns="streaming").remote(job)
            self._refs[job.run] = (ref, slot)
        threading.Thread(
            target=self._follow, args=(job.run, ref, slot, flight), daemon=True
        ).start()
        return ticket

    def _follow(self, run: str, stream: Any, slot: int, flight: _Flight) -> None:
        ray = _ray()
        try:
            for ref in stream:
                for message in ray.get(ref):
                    if not flight.deliver(message):
                        ray.cancel(stream)
                        return
        except ray.exceptions.TaskCancelledError:
            flight.end(RunEnd("cancelled"))
        except Exception as exc:  # the actor died, or Ray lost the task
            flight.end(RunEnd("lost", message=f"the Ray actor running it failed: {exc}"))
        else:
            flight.end(RunEnd("lost", message="the Ray actor ended the run without its end"))
        finally:
            with self._lock:
                self._refs.pop(run, None)
                self._load[slot] -= 1

    def cancel(self, run: str) -> None:
        with self._lock:
            found = self._refs.get(run)
        if found is not None:
            _ray().cancel(found[0])

    def close(self) -> None:
        ray = _ray()
        for actor in self._actors:
            with contextlib.suppress(Exception):  # an actor that died already
                ray.kill(actor)
        self._actors = []
        if self._started_here:
            ray.shutdown()


# How long joining a Ray cluster may take to answer a TCP connection (seconds).
REACH_S = 5.0


def _reachable(address: str | None) -> None:
    """`WorkerError` unless `address` (HOST:PORT or ray://HOST:PORT) takes a TCP
    connection: Ray itself retries an unreachable address for minutes."""
    import socket

    if address is None or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_S):
            return
    except (OSError, ValueError) as exc:
        why = "it is not HOST:PORT" if isinstance(exc, ValueError) else str(exc)
        raise WorkerError(
            f"cannot reach the Ray cluster at --ray-address {address}: {why}",
            hint="give the address of a running cluster's head (HOST:PORT, or ray://HOST:PORT "
            "for Ray Client), or leave --ray-address out to start a local Ray",
        ) from None


def run_workers(
    executor: str,
    pipelines: Mapping[str, Pipeline],
    database: Path,
    *,
    workers: int,
    ray_address: str | None = None,
) -> RunWorkers:
    """The (not yet started) workers of `executor` (`process` or `ray`)."""
    if executor == "process":
        return ProcessWorkers(pipelines, database, workers)
    if executor == "ray":
        return RayWorkers(pipelines, database, workers, ray_address)
    raise UsageError(f"no workers for executor {executor!r}", hint="use process or ray")
