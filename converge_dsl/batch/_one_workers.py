"""Workers that hold loaded pipelines and execute single runs (`OneRun`) as they come.

`RunWorkers` (`_one`) is the interface a service dispatches runs through:
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
  list per turn of the worker's loop), read by one thread per process until
  the pipe ends. A second thread per process waits for it to end (by a pidfd,
  which no process the worker forks holds) and then shuts the pipe down, so
  the reader sees the death even while a child of the worker keeps the
  worker's end open: the runs it held end `lost` and a new process takes its
  place. Both ends read the pipe a buffer at a time (`Frames`: one read
  for what came together, not a wait and two reads per list), and a message
  the worker's loop sends does not wake that loop through its self-pipe. A
  worker dies with the caller (`_process._die_with_parent`: killed by the
  kernel the moment the caller dies, on Linux), so a killed service leaves no
  worker writing its journals.
  `cancel` reaches the run's task at its next await. The first start and the
  start of a process in place of one that died are the one routine (`_ready`);
  they differ in what a failure means: at the first start it is the caller's
  error (`WorkerError`), later the slot is tried `RESTARTS` times, then left
  empty. `close` asks each process to stop: it cancels its runs, waits for
  them (at most `CANCEL_S`) and sends their ends, closes its pipelines (their
  tool servers), then ends.
- `RayWorkers(pipelines, database, n, address)` (`_one_ray`): `n` Ray actors (a local Ray,
  or the cluster at `address`), each holding the pipelines; a run is a
  streaming generator task on the least-loaded actor, whose items are lists
  of the run's messages, read by a thread per run. `cancel` cancels that
  task. An actor that dies ends its runs `lost`; `close` has each actor cancel its
  runs before it closes its pipelines. The actors open the journals by path,
  so they must run on the machine that holds it (a local Ray, or nodes
  sharing that folder).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import socket
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.errors import ConvergeError, UsageError

from ._one import (
    CANCEL_S,
    CLOSED,
    CheckpointKeys,
    Flight,
    InFlight,
    Message,
    OneRun,
    Relayed,
    RunEnd,
    RunTicket,
    RunWorkers,
    SpansKnown,
    SpansSent,
    WorkerError,
    close_pipelines,
    execute_one,
    open_journals,
)
from ._pipes import Frames, pickled, wait_exit

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from converge_dsl.runtime import RunSink, SqliteJournals

    from ._pipeline import Pipeline

__all__ = ["ProcessWorkers", "run_workers"]

# How long the workers may take to start (seconds).
START_S = 120.0
# How long `close` waits for a worker to end after it was asked to: its runs' cancel
# (`CANCEL_S`), then its pipelines' close (their tool servers' stop).
STOP_S = CANCEL_S + 10.0
# How many times a process that died is started again before its slot stays empty.
RESTARTS = 3


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
        self.in_flight = InFlight()
        self.runs: dict[str, asyncio.Task[None]] = {}  # by run id: its latest attempt
        self._lock = threading.Lock()
        self._pending: list[Message] = []
        self.stopping: asyncio.Task[None] | None = None
        self.frames = Frames()  # the commands read from the pipe
        self.keys = CheckpointKeys()  # each pipeline's checkpoint key, read at its first run
        self.sent = SpansSent()  # the compiled pipelines the caller has
        self._thread = threading.get_ident()  # the loop's: it made the worker

    def send(self, message: Message) -> None:
        """Queue `message`; the loop sends what is queued at its next turn, as one list
        (one pipe write for a burst of events)."""
        with self._lock:  # the loop and the journal's commit thread both send
            self._pending.append(message)
            if len(self._pending) == 1:
                if threading.get_ident() == self._thread:
                    self.loop.call_soon(self._flush)  # no wake-up of the loop's selector
                else:
                    self.loop.call_soon_threadsafe(self._flush)

    def _flush(self) -> None:
        with self._lock:
            burst = self._pending[:]
            self._pending.clear()
        if burst:
            with contextlib.suppress(OSError, ValueError):  # the caller is gone
                self.conn.send_bytes(pickled(burst))

    def on_readable(self) -> None:
        """Handle the commands the pipe holds (one read for all that came together)."""
        try:
            commands = self.frames.read(self.conn.fileno())
        except (EOFError, OSError):
            self.loop.remove_reader(self.conn.fileno())
            self.stop()  # the caller is gone
            return
        for command in commands:
            self.on_command(command)

    def on_command(self, command: tuple[Any, ...]) -> None:
        if command[0] == "run":
            if self.stopping is None:
                self._start(command[1], command[2])
            else:
                self.send(("end", command[2], RunEnd("cancelled")))
        elif command[0] == "cancel":
            found = self.tasks.get(command[1])
            if found is not None:
                found.cancel()
        elif command[0] == "stop":
            self.stop()

    def is_stopping(self) -> bool:
        """Whether the worker is stopping: a run cancelled now keeps its journal."""
        return self.stopping is not None

    def stop(self) -> None:
        """Cancel the runs, close the pipelines once they ended, then stop the loop."""
        if self.stopping is None:
            self.stopping = self.loop.create_task(self._stop())

    async def _stop(self) -> None:
        # The runs started before the stop took their first step before this one (theirs
        # were scheduled first), so each, cancelled, ends through `execute_one`'s handler.
        try:
            await self.in_flight.cancel()  # each run sends its end as it unwinds
            self._flush()
            await close_pipelines(self.pipelines.values())  # no run uses them now
        finally:
            self.loop.stop()

    def _start(self, job: OneRun, key: str) -> None:
        pipeline = self.pipelines[job.pipeline]
        run = execute_one(
            pipeline,
            job,
            self.send,
            self.journals,
            ident=key,
            closing=self.is_stopping,
            keys=self.keys,
            sent=self.sent,
        )
        task = self.loop.create_task(_after(self.runs.get(job.run), run, self.send, key))
        self.tasks[key] = self.runs[job.run] = task
        self.in_flight.add(task)
        task.add_done_callback(functools.partial(_forget, self.tasks, key))
        task.add_done_callback(functools.partial(_forget, self.runs, job.run))


def _worker_main(
    conn: Connection, pipelines: Mapping[str, Pipeline], database: Path, parent: int
) -> None:
    """A worker process: die with `parent`, open the journals, run what the pipe says
    until it says stop (or closes)."""
    from converge_dsl.engine import freeze_alive

    from ._process import _die_with_parent

    _die_with_parent(parent)
    # No program this one starts holds the pipe (a process it forks does: `_Process.watch`).
    os.set_inheritable(conn.fileno(), False)
    try:
        journals = open_journals(database)
    except ConvergeError as exc:
        conn.send(("failed", exc.message))  # its code is the WorkerError's: CD999
        return
    worker = _Worker(conn, pipelines, journals)
    worker.loop.add_reader(conn.fileno(), worker.on_readable)
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
        # A second handle on the caller's end of the pipe: shut down when the process
        # has ended (`watch`), which ends a read waiting on that end.
        self._waker = socket.socket(fileno=os.dup(here.fileno()))
        self.flights: dict[str, Flight] = {}
        self.known = SpansKnown()  # what its worker's `SpansSent` numbers stand for
        self.lock = threading.Lock()
        self.alive = False

    def send(self, command: tuple[Any, ...]) -> bool:
        with self.lock:
            try:
                self.conn.send_bytes(pickled(command))
                return True
            except (OSError, ValueError):
                return False

    def watch(self) -> None:
        """Wait for the process to end, then shut its pipe down: the reader then sees the
        pipe end even when a process the worker forked still holds the worker's end (a
        solver's child), which would keep it open, and the worker's sentinel with it."""
        wait_exit(self.process)
        with contextlib.suppress(OSError):
            self._waker.shutdown(socket.SHUT_RDWR)
        self._waker.close()

    def close(self) -> None:
        self.conn.close()
        self._waker.close()

    def end(self, seconds: float) -> None:
        """Wait (at most `seconds`) for the process to end; kill it if it has not."""
        self.process.join(seconds)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(seconds)


def _stop(slots: Sequence[_Process]) -> None:
    """Ask every process of `slots` to stop (all first, so they stop side by side), then
    wait for each (at most `STOP_S`), killing one that has not ended."""
    for slot in slots:
        slot.send(("stop",))
    for slot in slots:
        slot.end(STOP_S)


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
        self._pending: list[tuple[OneRun, Flight]] = []
        self._restarting = 0

    def start(self) -> None:
        if self._slots:
            return  # started already
        started = [_Process(self._context, self._args) for _ in range(self._n)]
        self._slots = started  # before they are ready: `pids` names them all
        self._ready(started)
        for index, slot in enumerate(started):
            self._read(index, slot)

    def _ready(self, started: Sequence[_Process]) -> None:
        """Wait for each of the processes just `started` to be ready (they start side by
        side); when one cannot start, end them all and raise its `WorkerError`."""
        try:
            for slot in started:
                self._wait_ready(slot)
        except WorkerError:
            _stop(started)
            for slot in started:
                slot.close()
            raise

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
        """Deliver the messages of `slot`'s process until its pipe ends (the process
        died or ended: `_Process.watch` shuts it down then)."""
        watcher = threading.Thread(target=slot.watch, name="converge-worker-watch", daemon=True)
        watcher.start()
        frames = Frames()
        fd = slot.conn.fileno()
        while True:
            try:
                bursts: list[list[Message]] = frames.read(fd)
            except (EOFError, OSError):
                break
            for burst in bursts:
                for sent in burst:
                    key = sent[1]
                    # a compiled pipeline is kept even for a run abandoned
                    message = slot.known.full(sent) if sent[0] == "compiled" else sent
                    flight = slot.flights.get(key)
                    if flight is None:
                        continue  # a run abandoned after a sink failed
                    if not flight.deliver(message):
                        slot.send(("cancel", key))
                        self._done(slot, key)
                    elif message[0] == "end":
                        self._done(slot, key)
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
        slot.close()

    def _replace(self, index: int) -> _Process | None:
        """A new process in slot `index`, whose process died (None when closing, or when
        it cannot start: the slot stays dead, runs go to the others or end lost); then
        the runs that waited for it are sent."""
        replacement: _Process | None = None
        for _ in range(RESTARTS):  # one killed while it started is started again
            if self._closing:
                break
            replacement = _Process(self._context, self._args)
            try:
                self._ready([replacement])
                break
            except WorkerError:
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
        self._dispatch(job, Flight(ticket, Relayed(sinks, on_checkpoint)))
        return ticket

    def _dispatch(self, job: OneRun, flight: Flight) -> None:
        """Send `job` to the process with the fewest runs; keep it while every process is
        being started again; end it lost when none can run it."""
        with self._lock:
            if self._closing:
                flight.end(RunEnd("lost", message=CLOSED))
                return
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
        """Take no more runs; ask every worker to stop (it cancels its runs, whose tickets
        end `lost` as their ends come back, then closes its pipelines); wait for them
        (at most `STOP_S`), then kill what is left."""
        with self._lock:
            self._closing = True
            slots = list(self._slots)
            waiting, self._pending = self._pending, []
            for slot in slots:
                for flight in slot.flights.values():
                    flight.cut(CLOSED)
        for _, flight in waiting:
            flight.end(RunEnd("lost", message=CLOSED))
        _stop(slots)

    def pids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(s.process.pid for s in self._slots if s.process.pid is not None)


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
        from ._one_ray import RayWorkers

        return RayWorkers(pipelines, database, workers, ray_address)
    raise UsageError(
        f"no workers for executor {executor!r}", hint="use process or ray", code=codes.API_MISUSE
    )
