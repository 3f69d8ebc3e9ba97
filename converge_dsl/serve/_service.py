"""The run service: queues, runs, pauses, cancels and recovers runs; no HTTP here.

`RunService(pipelines, store, limits, ...)` owns, per pipeline, a queue of at most `limits.queue`
waiting runs and `limits.concurrency` workers. A run is the Python API's run of the loaded pipeline
(`Pipeline.outcome`, so the one run assembly of docs/architecture.md §12) with two outputs: its
events (`EventSink`) and its checkpoint journal, the journal of `--checkpoint` kept in the service's
database (`RunStore.checkpoints`); each checkpoint record is committed with the events the run made
since the previous one. The run's result, status and remaining events are stored, and its journal
deleted, in one transaction (`RunStore.finish`), so a run ends exactly once; the end of a run that
stopped (on the service's loops or on a worker) is that transaction's write in the journals' next
group commit (`RunStore.finish_later`), and the run is answered once it is committed.

- `submit`, `cancel`, `decide` first refuse (503, CD993) a state database gone (`_state_file`).
- `submit` queues a run (`Refused` 429 with a `Retry-After` when the pipeline's queue is full);
  `wait` waits (bounded) for it to stop. A run that a waiting worker takes at once is stored started
  (`running`, its first attempt) by the write that adds it: a restart continues it as any running
  one. `commit="group"` adds it in the journals' next group commit (`add_later`): its id is told
  once `added` returns; `"with_end"`, for a caller that `wait`s: it may start at once, added with
  its end at the latest (`wait` waits for both). An add the group commit fails stops its run
  (`_not_added`: nothing of it is stored; `added` and `wait` raise the `StateError`, `submit` when
  not queued).
- A run that stops with `hitl_pause` is `paused`: its checkpoint holds the pending proposals.
  `decide` queues it again with decisions; the worker resumes it from the checkpoint with them
  (`--resume DIR --approve ...`).
- `cancel` cancels a queued or paused run at once and a running one by cancelling its task (status
  `cancelled`, no result); `cancel_and_wait` answers it then, a running one once its task stopped
  (`cancelled`, or `done` if it ended first) or still `running` after a timeout.
- `start` recovers: runs the store says were `running` when the server died are queued again and
  continue from their checkpoint journal (a run killed before its first record starts afresh);
  paused runs stay paused.
- `stop` (and `stopping`, told at the signal) stops the runs as docs/architecture.md,
  "Stopping the service", states, the pause rule included (`_stopping.StopRuns`): a
  stopping service's workers start no run; one added running for a worker is queued
  again; its waiters are answered with the run as it is.
- A worker whose run meets a failing state (`StateError`, CD993) ends that run as failed with the
  error, redacted, and goes on to the next one.
- `submit` with an idempotency key answers the run first queued with that key and the same request,
  and refuses (409) the key with another request.
- A `Retention` deletes finished runs past the newest N or older than D days with their events,
  results, journals and keys (`_prune_every`); never paused runs.

A pipeline's checkpoint key is read at its first run and kept (`CheckpointKeys`). Runs execute on
event loops of their own threads (`_loops`, `--run-threads`), so the HTTP layer answers while runs
compute; a run never waits for the disk there (its journal's commits are the group commit's, on its
own thread). Their events reach the streams through the service's loop. Errors a run stops on become
its result (`not_run_document`), every message passed through the redactor.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from converge_dsl import codes
from converge_dsl.clock import Clock, SystemClock, WallClock
from converge_dsl.errors import ConvergeError

from ._decisions import check_decisions
from ._events import EventSink, LiveRun
from ._executors import lost_too_often, one_run
from ._idempotency import IdempotencyKey, first_run
from ._limits import Limits, Retention
from ._loops import Remote, RunLoops
from ._metrics import Metrics
from ._requests import RunRequest, queue_full, refused
from ._results import Adds, Stopped, committed, redacted
from ._resumption import DECIDED_BY, StopAtCheckpoint, limits_of, local_run, resumption
from ._run_ends import RunTables
from ._state_file import StateFile
from ._stopping import StopRuns
from ._store import SETTLED, RunRow, RunStore, StateError

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline, RunWorkers

# How long a cancelled run may take to stop on its loop (close its models and journal).
CANCEL_S = 10.0
# A run whose worker died this many times fails (CD434) instead of being queued again.
MAX_STRIKES = 3


class RunService(StopRuns):
    """See the module docstring (how a run ends: `RunEnds`; its stop: `StopRuns`)."""

    def __init__(
        self,
        pipelines: Mapping[str, Pipeline],
        store: RunStore,
        state: Path,
        limits: Limits,
        *,
        clock: Clock,
        new_id: Callable[[], str],
        redact: Callable[[str], str],
        retention: Retention | None = None,
        workers: RunWorkers | None = None,
        run_threads: int = 1,
    ) -> None:
        self.pipelines = dict(pipelines)
        self.workers = workers
        self._run_threads = run_threads  # without `workers`: the threads runs execute on
        self._workers_started = False
        # Times each run's worker died under it (`MAX_STRIKES`; this process only).
        self._strikes: dict[str, int] = {}
        self._retention = retention or Retention()
        self.store = store
        self.state_file = StateFile(store.database)
        self.metrics = Metrics(self.pipelines)
        self._state = state
        self._limits = limits
        self._clock = clock
        self._wall: WallClock = clock if isinstance(clock, WallClock) else SystemClock()
        self._new_id = new_id
        self.redact = redact
        self._queues: dict[str, asyncio.Queue[str]] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._adds = Adds()
        self._runs = RunTables()  # shared with the bases (`RunEnds`, `StopRuns`)
        self._idle: dict[str, int] = {}  # pipeline -> its workers waiting for a run
        self._not_stopping()
        self._home: asyncio.AbstractEventLoop | None = None  # the service's loop, once started
        self._loops: RunLoops | None = None
        from converge_dsl.batch import CheckpointKeys

        self._keys = CheckpointKeys()

    def _now(self) -> float:
        """Seconds since the epoch, from the injected wall clock (what the store records)."""
        return self._wall.wall().timestamp()

    # --- life -------------------------------------------------------------------------

    def start_workers(self) -> None:
        """Start the worker processes or actors the runs execute on (`--executor process`,
        `ray`; nothing for `local`); `ConvergeError` when they cannot start."""
        if self.workers is not None and not self._workers_started:
            self.workers.start()
            self._workers_started = True

    async def start(self) -> None:
        """Recover the stored runs (see the module docstring), then start the workers."""
        self._queues = {name: asyncio.Queue() for name in self.pipelines}
        self._runs.handed.clear()  # a service started again: its runs are recovered
        self._runs.added.clear()
        self._not_stopping()
        self._home = asyncio.get_running_loop()
        if self.workers is not None:
            await asyncio.to_thread(self.start_workers)
        else:
            self._loops = RunLoops(self._run_threads)
        for row in self.store.recover(self._now()):
            if row.pipeline in self._queues:
                self._queues[row.pipeline].put_nowait(row.id)
        for name in self.pipelines:
            for _ in range(self._limits.concurrency):
                self._workers.append(asyncio.create_task(self._work(name)))
        if self._retention.active:
            self._workers.append(asyncio.create_task(self._prune_every()))

    async def _prune_every(self) -> None:
        """Apply the retention now and every `Retention.every_s` (on the injected clock)."""
        while True:
            with contextlib.suppress(ConvergeError):  # a busy or failing state: next pass
                self.prune()
            await self._clock.sleep(self._retention.every_s)

    def prune(self) -> list[str]:
        """Delete the finished runs the retention no longer keeps; their ids."""
        rule = self._retention
        before = None if rule.days is None else self._now() - rule.days * 86400
        gone = self.store.prune(keep=rule.keep_runs, before=before)
        for run in gone:
            self._runs.ended.pop(run, None)
        return gone

    def _cancel_s(self) -> float:
        """How long a cancelled run may take to stop: `CANCEL_S`, less once stopping."""
        if not self._stopping:
            return CANCEL_S
        return max(0.0, min(CANCEL_S, self._stop_by - self._clock.monotonic()))

    def queue_depth(self, pipeline: str) -> int:
        return self._queues[pipeline].qsize() if pipeline in self._queues else 0

    def running(self) -> int:
        return len(self._tasks)

    # --- requests ---------------------------------------------------------------------

    def submit(
        self,
        pipeline: str,
        request: RunRequest,
        key: IdempotencyKey | None = None,
        *,
        commit: Literal["now", "group", "with_end"] = "now",
    ) -> str:
        """Queue a run of `pipeline`; its id. `Refused` (429) when the queue is full; its
        add committed as `commit` says (see the module docstring).

        With an idempotency `key`: the run first queued with that key when the request is
        the same (pipeline, inputs, budget), nothing queued; `Refused` (409) naming the
        first difference when it is not.
        """
        self.state_file.check()
        data, digest = request.data(), None
        if key is not None:
            digest, first = first_run(self.store, key, pipeline, data)
            if first is not None:
                return first
        queue = self._queues[pipeline]
        if queue.qsize() >= self._limits.queue:
            self.metrics.rejected(pipeline)
            raise queue_full(pipeline, self._limits.queue)
        run = self._new_id()
        idempotency = None if key is None or digest is None else (key.value, digest)
        # A worker waits with nothing queued before it: it takes this run next, so the run
        # is added started (one write, not two; `_work` does not start it again).
        running = self._idle.get(pipeline, 0) > queue.qsize()
        adding = (run, pipeline, data, self._now(), idempotency)
        if commit == "now":
            added = self.store.add(*adding, running=running)
        else:
            added, write = self.store.add_later(*adding, running=running, urgent=commit == "group")
            self._adds.watch(run, write, asyncio.get_running_loop(), self._not_added)
        # its worker need not read it back (`_work`)
        (self._runs.handed if running else self._runs.added)[run] = added
        self.metrics.submitted(run, self._clock.monotonic())
        queue.put_nowait(run)
        self._runs.ended[run] = Stopped(queued=True)  # a `wait` need not read it back
        return run

    def get(self, run: str) -> RunRow:
        row = self.store.get(run)
        if row is None:
            gone = self.state_file.refusal(unknown=run)  # "no such run" may then be false
            if gone is not None:
                raise gone
            hint = "a run id is one that POST /v1/pipelines/NAME/runs answered with"
            raise refused(404, codes.SERVE_NOT_FOUND, f"no run {run!r}", "", hint)
        return row

    def live(self, run: str) -> LiveRun | None:
        return self._runs.live.get(run)

    async def added(self, run: str) -> None:
        """Once the add of `run` is committed (`submit`); `StateError` if it failed."""
        await committed(self._adds.get(run) or self.store.pending(run))

    async def wait(self, run: str, timeout: float) -> RunRow:
        """The run once it stops (done, paused, cancelled), or as it is after `timeout` s,
        or once a stopping service answers its waiters (`StopRuns._wait_s`, also for a wait
        begun after the signal); never before its add is committed (`StateError` if that
        failed)."""
        adding = self._adds.get(run) or self.store.pending(run)
        ended = self._runs.ended.get(run)
        if ended is None or not ended.queued:  # not known to be waiting since `submit`
            row = self.get(run)
            if row.status in SETTLED:
                return row  # nothing kept for it: no end is to come and pop it
            ended = self._runs.ended.setdefault(run, Stopped())
        with contextlib.suppress(TimeoutError):
            # no task of its own, as `wait_for` makes; shorter once stopping (`_wait_s`)
            async with asyncio.timeout(self._wait_s(run, timeout)):
                await ended.wait()
        await committed(adding)  # at once when its end was stored: with it or before
        return ended.row if ended.row is not None else self.get(run)

    def cancel(self, run: str) -> RunRow:
        self.state_file.check()
        row = self.get(run)
        if self.store.cancel(run, self._now()):  # a paused run's journal goes with it
            self.metrics.ended(run, self._clock.monotonic())
            self._signal(run)
            return self.get(run)
        handed = self._runs.handed.pop(run, None)
        if handed is not None:  # added running, its worker not there yet: it finds none
            self._end(run, None, "cancelled", "cancelled", None, row=handed)
            return self.get(run)
        task = self._tasks.get(run)
        if task is not None and task.cancel():  # not done: it has not ended yet
            self._runs.cancelling.add(run)
        return row

    async def cancel_and_wait(self, run: str, timeout: float) -> RunRow:
        """`cancel` the run, then answer it (see the module docstring)."""
        row = self.cancel(run)
        return await self.wait(run, timeout) if row.status == "running" else row

    def _not_added(self, run: str) -> None:
        """The group commit holding the add of `run` failed: it does not run, or no longer
        (its waiters get the add's `StateError`)."""
        self._adds.forget(run)
        self.metrics.forget(run)  # its stop, if it had one, was not a run's
        self._runs.added.pop(run, None)  # its worker finds no queued run to start
        self._runs.handed.pop(run, None)
        task = self._tasks.get(run)
        if task is not None and task.cancel():
            self._runs.cancelling.add(run)
        else:
            self._signal(run)

    async def decide(self, run: str, decisions: Mapping[str, bool]) -> RunRow:
        """Queue the paused `run` again with `decisions` (unknown ids refused, 422; a run
        of a pipeline this server does not serve refused, 409, and left paused)."""
        self.state_file.check()
        row = self.get(run)
        check_decisions(row, decisions, self._queues)
        if run in self._tasks:  # its pause is stored, its task still ending: let it end first
            await asyncio.wait({self._tasks[run]})
        if not self.store.decide(run, decisions, self._now()):
            raise refused(409, codes.SERVE_BAD_DECISION, f"run {run!r} is no longer paused", "")
        self._runs.ended.pop(run, None)
        self.metrics.submitted(run, self._clock.monotonic())
        self._queues[row.pipeline].put_nowait(run)
        return self.get(run)

    # --- running ----------------------------------------------------------------------

    async def _work(self, pipeline: str) -> None:
        queue = self._queues[pipeline]
        while True:
            self._idle[pipeline] = self._idle.get(pipeline, 0) + 1
            try:
                run = await queue.get()
            finally:
                self._idle[pipeline] -= 1
            if self._stopping:  # it starts no run: `stop` leaves it queued (or requeues it)
                await asyncio.Future()  # until `stop` cancels this worker
            row = self._runs.handed.pop(run, None)  # added running for this worker (`submit`)
            try:
                if row is None:
                    row = self.store.start(run, self._now(), queued=self._runs.added.pop(run, None))
            except StateError as error:
                self._state_failed(pipeline, run, None, error)
                continue
            if row is None:
                continue  # cancelled while it waited
            task = asyncio.create_task(self._execute(pipeline, row))
            self._tasks[run] = task
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                worker = asyncio.current_task()
                if worker is not None and not worker.cancelling():  # a DELETE, before it ran
                    self._runs.cancelling.discard(run)
                    self._end(run, None, "cancelled", "cancelled", None, row=row)
                    continue
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                raise
            finally:
                if self._tasks.get(run) is task:  # not the attempt a decision started since
                    del self._tasks[run]

    async def _execute(self, name: str, row: RunRow) -> None:
        try:
            await self._run(name, row)
        except StateError as error:
            self._state_failed(name, row.id, row, error)

    async def _run(self, name: str, row: RunRow) -> None:
        run = row.id
        pipeline = self.pipelines[name]
        first = 0 if row.attempts == 1 else self.store.next_event(run)  # a first has none
        home = asyncio.get_running_loop()
        live = LiveRun(first, home)
        self._runs.live[run] = live

        def flush() -> None:
            self.store.add_events(run, live.unstored())

        def alongside() -> list[tuple[str, Any]]:
            return self.store.event_statements(run, live.unstored())

        started = self._clock.monotonic()
        if self.workers is not None:
            await self._on_workers(name, row, live, flush, started)
            return
        assert self._loops is not None  # started

        def halt() -> None:  # on the run's thread, at the checkpoint record it stops at
            live.halt()
            remote.cancel()  # at once: what it does from here is not kept
            home.call_soon_threadsafe(self._signal, run)  # its waiters: where it stands

        journal = StopAtCheckpoint(
            self.store.checkpoints.journal(run, alongside=alongside),
            lambda: self._stopping,
            halt,
            live.drop,
            lambda: live.finished,
        )
        self._runs.cuts[run] = journal.cut
        outcome = local_run(
            pipeline,
            row,
            EventSink(live, flush),
            journal,
            state=self._state,
            key=lambda: self._keys.of(pipeline),  # read on its loop: a failure fails the run
            max_run_s=self._limits.max_run_s,
        )
        remote = self._loops.submit(outcome)

        try:
            try:
                body = await remote.result()
            except asyncio.CancelledError:
                body = await self._cancelled(run, live, remote)
        except asyncio.CancelledError:
            if run not in self._runs.cancelling:
                self._store_all(run, live)  # a shutdown: the run continues at the next start
                if remote.done():  # its worker ended: queued again now
                    with contextlib.suppress(StateError):  # else recovered as after a kill
                        self.store.requeue(run, self._now())
                task = asyncio.current_task()
                if live.halted and task is not None and not task.cancelling():
                    return  # cancelled by `halt`, not by its worker: that goes on
                raise
            self._runs.cancelling.discard(run)
            self._end(run, live, "cancelled", "cancelled", None, row=row)
            return
        except ConvergeError as exc:
            await self._end_later(run, live, "done", *self._failed(pipeline, exc), row=row)
            return
        except Exception as exc:  # a fault of this service, not of the request
            error = ConvergeError(f"the run failed: {exc!r}", code=codes.SERVE_RUN_FAILED)
            await self._end_later(run, live, "done", *self._failed(pipeline, error), row=row)
            return
        finally:
            self._runs.cuts.pop(run, None)
        reason = str(body.get("stop_reason"))
        self.metrics.finished(name, body, self._clock.monotonic() - started)
        await self._end_later(
            run, live, "paused" if reason == "hitl_pause" else "done", reason, body, row=row
        )

    async def _cancelled(self, run: str, live: LiveRun, remote: Remote[Any]) -> Any:
        """The run's task was cancelled (a DELETE or a shutdown): its run's task stops
        first, cancelled too unless it made its last event in a shutdown (its end comes
        first, `_cancel_s` at most). Its result if it ended so, else `CancelledError`."""
        if run in self._runs.cancelling or not live.finished:
            remote.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(remote.result(), self._cancel_s())
        if run in self._runs.cancelling or not remote.returned():
            raise asyncio.CancelledError
        return remote.value()  # a shutdown after its end: stored as any end

    async def _on_workers(
        self, name: str, row: RunRow, live: LiveRun, flush: Callable[[], None], started: float
    ) -> None:
        """Run `row` on a worker (`--executor process|ray`): its events played on the
        run's `EventSink` as they come, stored with the group commit after each of its
        checkpoint records; its end stored as the local run's is, in the group commit
        (`_end_later`). A run whose worker died is queued again (from its journal);
        struck `MAX_STRIKES` times, it fails."""
        assert self.workers is not None
        run = row.id
        resume, decisions = resumption(self.store.checkpoints, self.pipelines[name], row)
        inputs = RunRequest.of(row.request).inputs
        job = one_run(
            row, name, inputs, self.store.database, limits_of(row, self._limits.max_run_s)
        )
        job = dataclasses.replace(job, resume=resume, decisions=decisions, decided_by=DECIDED_BY)

        def checkpointed() -> None:  # the events so far, in the journals' next group commit
            statements = self.store.event_statements(run, live.unstored())
            self.store.checkpoints.queue(run, (), statements)

        ticket = self.workers.submit(job, (EventSink(live, flush),), on_checkpoint=checkpointed)
        future = asyncio.wrap_future(ticket.future)
        try:
            end = await asyncio.shield(future)
        except asyncio.CancelledError:
            if run not in self._runs.cancelling:
                self._store_all(run, live)
                raise  # a shutdown: the run stays running and continues at the next start
            self._runs.cancelling.discard(run)
            self.workers.cancel(run)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), CANCEL_S)
            self._end(run, live, "cancelled", "cancelled", None, row=row)
            return
        if end.status == "lost":
            self._lost(name, row, live, flush, end.message)
            return
        self._strikes.pop(run, None)
        if end.status == "cancelled" or end.body is None:
            self._end(run, live, "cancelled", "cancelled", None, row=row)
            return
        body = end.body if end.status == "done" else redacted(dict(end.body), self.redact)
        reason = str(body.get("stop_reason"))
        if end.status == "done":
            self.metrics.finished(name, body, self._clock.monotonic() - started)
        status = "paused" if reason == "hitl_pause" else "done"
        await self._end_later(run, live, status, reason, body, row=row)

    def _lost(
        self, name: str, row: RunRow, live: LiveRun, flush: Callable[[], None], why: str
    ) -> None:
        """The worker of `row` died: queue it again, or fail it after `MAX_STRIKES`."""
        run = row.id
        strikes = self._strikes[run] = self._strikes.get(run, 0) + 1
        if strikes >= MAX_STRIKES:
            self._strikes.pop(run, None)
            error = lost_too_often(strikes, why)
            self._end(run, live, "done", *self._failed(self.pipelines[name], error), row=row)
            return
        self.store.checkpoints.commit_now(run)  # its queued events: the next attempt
        flush()  # numbers its own after every stored one
        live.end()
        self._runs.live.pop(run, None)
        if self.store.requeue(run, self._now()):
            self._queues[name].put_nowait(run)
