"""How the run service stops (`StopRuns`, a base of `RunService`): the stop contract of
docs/architecture.md, "Stopping the service", stated there once.

`stopping(forced=...)`, told at the signal, starts it: waiters of runs that do not run
answered at once, the rest by `ANSWER_S`, when the runs still running are also cut
(`_cut_all`: their streams end without `end` before uvicorn's drain of connections,
`STOP_S`, would cancel them, and what they were given is stored). `stop` lets each run on
the service's loops reach its next checkpoint record (`StopAtCheckpoint`), then cancels
the workers and runs in flight, waits for them until `STOP_S` from the signal, cuts what
is left and commits the group commit's queued writes. Forced (a second Ctrl-C), no run is
waited for at a checkpoint: they are cancelled at once and given `FORCED_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import TYPE_CHECKING

from converge_dsl.errors import ConvergeError

from ._events import LiveRun
from ._loops import RunLoops
from ._run_ends import RunEnds
from ._store import StateError

if TYPE_CHECKING:
    from converge_dsl.batch import RunWorkers

# How long a stopping service takes at most, from the signal: its runs reaching their next
# checkpoint record, then those that did not cancelled. Under the grace period of common
# process managers (Docker's 10 s); uvicorn's drain of connections is given as long.
STOP_S = 5
# By when (from the signal) a stopping service answers its waiters and cuts its runs still
# running: before uvicorn's drain of connections (`STOP_S`) cancels their requests.
ANSWER_S = STOP_S - 1.0
# How long a forced stop (a second Ctrl-C) gives its cancelled runs to store what they did.
FORCED_S = 0.5


class StopRuns(RunEnds):
    """The stop of a service's runs (see the module docstring): its own state of the stop
    (`_not_stopping`), the runs' tables of `RunTables`, the rest set by `RunService`."""

    workers: RunWorkers | None
    _workers_started: bool
    _workers: list[asyncio.Task[None]]
    _loops: RunLoops | None
    _home: asyncio.AbstractEventLoop | None

    def _not_stopping(self) -> None:
        """No stop asked (a service made, or started again)."""
        self._stopping = False  # `stopping`: runs stop at their next checkpoint record
        self._stop_by = 0.0  # by when (on the monotonic clock), once stopping
        self._forced = False  # `stopping(forced=True)`: no run waited for past `FORCED_S`

    def stopping(self, *, forced: bool = False) -> None:
        """The server is stopping: each run on the service's loops stops at its next
        checkpoint record (see the module docstring); `forced`: at once. Called by the
        signal handler, on the service's thread."""
        now = self._clock.monotonic()
        if not self._stopping:
            self._stopping = True
            self._stop_by = now + STOP_S
            if self._home is not None:  # from a signal handler: the loop told safely
                self._home.call_soon_threadsafe(self._answer_waiters)
        if forced:
            self._forced = True
            self._stop_by = min(self._stop_by, now + FORCED_S)
            if self._home is not None:  # no more wait: every waiter answered now
                self._home.call_soon_threadsafe(self._answer_now)

    def _answer_waiters(self) -> None:
        """Answer at once the waiters of runs that do not run (they start no more), the
        others by `ANSWER_S` (`_answer_all`)."""
        for run in [run for run in self._runs.ended if run not in self._runs.live]:
            self._signal(run)
        if self._runs.ended or self._runs.live:  # runs to answer or to cut
            self._workers.append(asyncio.create_task(self._answer_all()))

    async def _answer_all(self) -> None:
        """By `ANSWER_S`: the runs still running cut (their streams ended before uvicorn's
        drain of connections, `STOP_S`, cancels them), every waiter answered."""
        await self._clock.sleep(self._until_answered())
        self._cut_all()
        self._answer_now()

    def _cut_all(self) -> None:
        """Cut every run on the service's loops where it stands (`StopAtCheckpoint.cut`):
        nothing more of it kept, its streams ended without `end`, the events they were
        given stored; a run that made its last event, or whose task stopped, only has its
        streams ended (its end, or pause, is stored as it comes)."""
        for run, live in list(self._runs.live.items()):
            if live.ended or live.halted:
                continue
            cut = self._runs.cuts.get(run)  # none once its task stopped
            if live.finished or cut is None:
                live.halt()
            else:
                cut()
            with contextlib.suppress(StateError):  # else recovered as after a kill
                self._store_all(run, live)

    def _store_all(self, run: str, live: LiveRun) -> None:
        """Store the events of `run` not stored yet, at a stop: every number its streams
        sent is then below the number past them, noted as sent where a stream noted more
        (`_streams.SENT_AHEAD`), so the next attempt skips none."""
        self.store.add_events(run, live.unstored())
        past = live.first + len(live.records)
        if live.sent > past:  # a stream noted more
            live.sent = past
            self.store.mark_sent(run, past)

    def _answer_now(self) -> None:
        """Answer every waiter with its run as it is."""
        for run in list(self._runs.ended):
            self._signal(run)

    @property
    def is_stopping(self) -> bool:
        return self._stopping

    def _wait_s(self, run: str, timeout: float) -> float:
        """How long a waiter of `run` that starts now waits (`timeout` at most): once
        stopping, not at all for a run that does not run (it starts no more) or in a forced
        stop, else until `ANSWER_S` from the signal, when the others were answered."""
        if not self._stopping:
            return timeout
        if self._forced or run not in self._runs.live:
            return 0.0
        return min(timeout, self._until_answered())

    def _until_answered(self) -> float:
        """Seconds left, once stopping, until `ANSWER_S` from the signal (0 past it)."""
        return max(0.0, self._stop_by - STOP_S + ANSWER_S - self._clock.monotonic())

    async def stop(self) -> None:
        """Let the runs reach a checkpoint, then cancel the workers and runs in flight; at
        most `STOP_S` from `stopping` (see the module docstring)."""
        self.stopping()
        while self.workers is None and self._clock.monotonic() < self._stop_by:
            if self._forced or all(live.halted or live.ended for live in self._runs.live.values()):
                break
            await self._clock.sleep(0.02)
        for task in self._workers:
            task.cancel()
        workers, self._workers = self._workers, []
        while not all(task.done() for task in workers):  # a run's cancel: at most `_cancel_s`
            if self._clock.monotonic() >= self._stop_by:
                break  # forced (the loop's end cancels them again, which ends their wait)
            await asyncio.wait(workers, timeout=0.05)
        self._cut_all()  # the runs still there: their streams end, their events stored
        with contextlib.suppress(ConvergeError, sqlite3.Error):  # else stored by the close
            await asyncio.to_thread(self.store.checkpoints.commit_now)
        for run in self._runs.handed:  # added running for a worker that never started it
            with contextlib.suppress(StateError):  # else recovered as after a kill
                self.store.requeue(run, self._now())
        self._runs.handed.clear()
        if self._loops is not None:
            await self._loops.close(self._close_pools)
            self._loops = None
        if self.workers is not None and self._workers_started:
            await asyncio.to_thread(self.workers.close)
            self._workers_started = False

    async def _close_pools(self) -> None:
        """Close the pipelines' connection pools of the running loop."""
        for pipeline in self.pipelines.values():
            with contextlib.suppress(ConvergeError, OSError):
                await pipeline.aclose()
