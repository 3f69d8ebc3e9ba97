"""`RayWorkers`: Ray actors that hold loaded pipelines and execute single runs.

`RayWorkers(pipelines, database, n, address)` starts `n` actors (on a local
Ray it starts, or on the cluster at `address`, which must take a TCP
connection first: Ray itself retries an unreachable one for minutes), each
holding every pipeline and its own connection to the journals in `database`.
A run is a streaming generator task on the least-loaded actor, whose items
are lists of the run's messages (`_one`), read by a thread per run; `cancel`
cancels that task; an actor that dies ends its runs `lost`, and Ray starts it
again in its place, as often as it dies (as a worker process is), with the
same constructor as its first start: a restart is the first start again.
An actor that failed takes no run until it answers again (`_revive`); a run
that could not reach its actor before it ran (Ray's `ActorUnavailableError`
with no message heard: sent before Ray saw the actor die) goes to another
actor that is up, or waits for one, at most `START_S` after it was
submitted, then ends `lost`. `close` takes no more runs and has each actor cancel
its runs and wait for them (`_one.InFlight`), their ends coming back as `lost`
(`CLOSED`), then close its pipelines (stopping their tool servers) before it
is killed (`_ray.stop_actors`). The actors open the journals by path, so
they must run on the machine that holds them (a local Ray, or nodes sharing
that folder).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    WorkerError,
    close_pipelines,
    execute_one,
    open_journals,
)
from ._ray import stop_actors

if TYPE_CHECKING:
    from converge_dsl.runtime import RunSink

    from ._pipeline import Pipeline

__all__ = ["RayWorkers"]

# How long the actors may take to start (seconds), and a run to reach an actor that is
# up while its actor restarts.
START_S = 120.0
# How long one look at whether an actor that failed answers again waits (seconds).
READY_S = 1.0


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
        self._in_flight = InFlight()
        self._keys = CheckpointKeys()  # each pipeline's checkpoint key, read at its first run here

    def ready(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        """Cancel the runs in flight and wait for them to end (`InFlight`), then stop the
        pipelines' tool servers (their process groups too) and close their connection
        pools."""
        await self._in_flight.cancel()
        await close_pipelines(self._pipelines.values())

    async def run(self, job: OneRun) -> Any:
        """The run's messages, as they happen (a streaming generator task)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Message] = asyncio.Queue()

        def send(message: Message) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, message)

        if self._in_flight.closing:
            yield [("end", job.run, RunEnd("cancelled"))]
            return
        pipeline = self._pipelines[job.pipeline]
        closing = self._in_flight
        task = asyncio.ensure_future(
            execute_one(
                pipeline,
                job,
                send,
                self._journals,
                closing=lambda: closing.closing,
                keys=self._keys,
            )
        )
        self._in_flight.add(task)
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
        self._refs: dict[str, tuple[Any, int, Flight]] = {}
        # The actors that failed and have not answered since, and the runs sent while
        # every actor was down (each with its deadline).
        self._down: set[int] = set()
        self._waiting: list[tuple[OneRun, Flight, float]] = []
        self._cancelled: set[Flight] = set()  # cancels that may come while one is sent again
        self._lock = threading.Lock()
        self._started_here = False
        self._closing = False
        self._pids: tuple[int, ...] = ()

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
        actor = ray.remote(num_cpus=0, max_restarts=-1)(_RunActor)
        self._actors = [actor.remote(self._pipelines, self._database) for _ in range(self._n)]
        self._load = [0] * self._n
        try:
            self._pids = tuple(ray.get([a.ready.remote() for a in self._actors], timeout=START_S))
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
        flight = Flight(ticket, Relayed(sinks, on_checkpoint))
        self._send(job, flight, time.monotonic() + START_S)
        return ticket

    def _send(self, job: OneRun, flight: Flight, deadline: float) -> None:
        """Send `job` to the least-loaded actor that is up; keep it while every actor
        restarts (until `deadline`, on `time.monotonic()`)."""
        with self._lock:
            if self._closing:
                flight.end(RunEnd("lost", message=CLOSED))
                return
            if flight in self._cancelled:  # cancelled while it was to be sent again
                self._cancelled.discard(flight)
                flight.end(RunEnd("cancelled"))
                return
            up = [slot for slot in range(len(self._actors)) if slot not in self._down]
            if not up:
                self._waiting.append((job, flight, deadline))
                return
            slot = min(up, key=self._load.__getitem__)
            self._load[slot] += 1
            ref = self._actors[slot].run.options(num_returns="streaming").remote(job)
            self._refs[job.run] = (ref, slot, flight)
        threading.Thread(
            target=self._follow, args=(job, ref, slot, flight, deadline), daemon=True
        ).start()

    def _follow(self, job: OneRun, stream: Any, slot: int, flight: Flight, deadline: float) -> None:
        ray = _ray()
        heard = False
        try:
            for ref in stream:
                for message in ray.get(ref):
                    heard = True
                    if not flight.deliver(message):
                        ray.cancel(stream)
                        return
        except ray.exceptions.TaskCancelledError:
            flight.end(RunEnd("cancelled"))
        except Exception as exc:  # the actor died, or Ray lost the task
            self._failed(slot)
            unavailable = isinstance(exc, ray.exceptions.ActorUnavailableError)
            if heard or not unavailable or time.monotonic() > deadline:
                flight.end(RunEnd("lost", message=f"the Ray actor running it failed: {exc}"))
            else:  # it never ran: sent again once an actor is up
                self._send(job, flight, deadline)
        else:
            flight.end(RunEnd("lost", message="the Ray actor ended the run without its end"))
        finally:
            self._forget(job.run, stream)
            with self._lock:
                self._load[slot] -= 1
                self._cancelled.discard(flight)

    def _forget(self, run: str, stream: Any) -> None:
        with self._lock:
            if run in self._refs and self._refs[run][0] is stream:
                del self._refs[run]

    def _failed(self, slot: int) -> None:
        """The actor in `slot` failed: no run goes to it until it answers again."""
        with self._lock:
            if slot in self._down or self._closing:
                return
            self._down.add(slot)
        threading.Thread(target=self._revive, args=(slot,), daemon=True).start()

    def _revive(self, slot: int) -> None:
        """Wait (at most `START_S`) for the actor in `slot` to answer, then take it back
        and send the runs that waited (to it, or lost when their time is up)."""
        ray = _ray()
        deadline = time.monotonic() + START_S
        while not self._closing and time.monotonic() < deadline:
            try:
                ray.get(self._actors[slot].ready.remote(), timeout=READY_S)
                break
            except Exception:  # restarting still
                time.sleep(READY_S / 10)
        with self._lock:
            self._down.discard(slot)
            waiting, self._waiting = self._waiting, []
        for job, flight, until in waiting:
            if time.monotonic() > until:
                flight.end(RunEnd("lost", message="no Ray actor answered in time"))
            else:
                self._send(job, flight, until)

    def pids(self) -> tuple[int, ...]:
        """The actors' processes as they were first started (of this machine only with a
        local Ray)."""
        return self._pids

    def cancel(self, run: str) -> None:
        with self._lock:
            found = self._refs.get(run)
            if found is not None:
                self._cancelled.add(found[2])
            waiting = [item for item in self._waiting if item[0].run == run]
            self._waiting = [item for item in self._waiting if item[0].run != run]
        for _, flight, _ in waiting:
            flight.end(RunEnd("cancelled"))
        if found is not None:
            _ray().cancel(found[0])

    def close(self) -> None:
        """Take no more runs; have the actors cancel theirs (their tickets end `lost` as
        their ends come back) before they close their pipelines; kill the actors."""
        ray = _ray()
        with self._lock:
            self._closing = True
            flights = [flight for _, _, flight in self._refs.values()]
            waiting, self._waiting = self._waiting, []
        for _, flight, _ in waiting:
            flight.end(RunEnd("lost", message=CLOSED))
        for flight in flights:
            flight.cut(CLOSED)

        def ended() -> None:  # the ends the actors sent, read before the kill
            futures = [flight.ticket.future for flight in flights]
            concurrent.futures.wait(futures, timeout=CANCEL_S)

        stop_actors(ray, self._actors, ended)
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
