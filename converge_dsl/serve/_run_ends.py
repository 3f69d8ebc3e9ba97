"""How a run of the service ends: its end stored, then its streams and waiters told.

`RunEnds` is the base of `RunService` holding that concern. A run ends exactly once:
`_end` stores its end (`RunStore.finish`: status, stop reason, result and last events in
one transaction), `_end_later` in the journals' next group commit (`finish_later`),
answering its waiters once that commit is made; `_ended_as` then ends its live events
and wakes its waiters (`_signal`); a run stopped at a checkpoint does not end. A run
the state failed under (`StateError`, CD993) ends as failed with the error
(`_state_failed`), so its worker goes on to the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from converge_dsl._json_types import JsonObject
from converge_dsl.clock import Clock
from converge_dsl.errors import ConvergeError

from ._events import LiveRun
from ._loops import Inbox
from ._metrics import Metrics
from ._results import Stopped, ended_row, failed
from ._store import RunRow, RunStore, StateError, result_json

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline


class RunTables:
    """The tables a service keeps of its runs, one record shared by `RunService` and its
    bases (`RunEnds`, `StopRuns`), which change them in place."""

    __slots__ = ("added", "cancelling", "cuts", "ended", "handed", "live")

    def __init__(self) -> None:
        # run -> what its streams are given, while it runs
        self.live: dict[str, LiveRun] = {}
        # run -> what its waiters wait on, until it stops (or a stop answers them)
        self.ended: dict[str, Stopped] = {}
        # runs whose task a cancel (a DELETE, not a shutdown) cancelled
        self.cancelling: set[str] = set()
        # run on the service's loops -> the callable cutting it where it stands
        self.cuts: dict[str, Callable[[], None]] = {}
        # added running by `submit` for a waiting worker, not yet taken by it
        self.handed: dict[str, RunRow] = {}
        # queued by `submit`, not yet started
        self.added: dict[str, RunRow] = {}


class RunEnds:
    """The ends of a service's runs (see the module docstring); `RunService` sets what it
    reads, its runs' tables the one `RunTables` record `_runs`."""

    pipelines: dict[str, Pipeline]
    store: RunStore
    metrics: Metrics
    redact: Callable[[str], str]
    _clock: Clock
    _runs: RunTables

    def _now(self) -> float:
        raise NotImplementedError

    def _state_failed(self, name: str, run: str, row: RunRow | None, error: StateError) -> None:
        """The state failed under `run` (CD993): end it as failed with the error, so that
        its worker goes on to the next run instead of dying. When the state cannot store
        even that, the run stays as stored (a running one continues at the next start)
        and its waiters are answered with what the store says."""
        reason, body = self._failed(self.pipelines[name], error)
        self._end(run, self._runs.live.get(run), "done", reason, body, row=row, state_failed=True)

    def _failed(self, pipeline: Pipeline, error: ConvergeError) -> tuple[str, JsonObject]:
        return failed(error, pipeline.path, self.redact)

    def _end(
        self,
        run: str,
        live: LiveRun | None,
        status: str,
        reason: str,
        body: JsonObject | None,
        *,
        row: RunRow | None,
        state_failed: bool = False,
    ) -> None:
        """Store the end of `run` (`RunStore.finish`), then tell its streams and waiters.
        `state_failed`: the end of a run the state failed under (`_state_failed`), running
        or not yet started, which a state that fails again leaves as stored."""
        now = self._now()
        text = None if body is None else result_json(body)
        events = [] if live is None else live.unstored()
        try:
            stored = self.store.finish(
                run,
                status=status,
                stop_reason=reason,
                body=body,
                events=events,
                now=now,
                was=("queued", "running") if state_failed else ("running",),
                text=text,
            )
        except StateError:
            if not state_failed:
                raise  # its worker ends it as failed (`_execute`)
            stored = False
        self._ended_as(
            run, live, status, reason, body, text=text, row=row if stored else None, at=now
        )

    async def _end_later(
        self, run: str, live: LiveRun, status: str, reason: str, body: JsonObject, *, row: RunRow
    ) -> None:
        """`_end` a running run in the journals' next group commit (`finish_later`): its
        waiters are told once that commit is made. A `StateError` is raised as `_end`'s.
        A cancel that came while that commit was made is too late for an end, not for a
        pause: the paused run is then cancelled (`RunStore.cancel`). A run stopped at a
        checkpoint (`LiveRun.halted`, a stopping service's) that reached its end all the
        same ends, unless something it did past that record was not kept
        (`LiveRun.dropped`): it is then queued again to continue from that record."""
        if live.halted and live.dropped:
            with contextlib.suppress(StateError):  # else recovered as after a kill
                self.store.requeue(run, self._now())
            return
        now = self._now()
        text = result_json(body)
        ending = self.store.finish_later(
            run,
            status=status,
            stop_reason=reason,
            body=body,
            events=live.unstored(),
            now=now,
            text=text,
        )
        stored, cancelled = Inbox.of(asyncio.get_running_loop()).future(ending), False
        while True:
            try:
                written = await asyncio.shield(stored)
                break
            except asyncio.CancelledError:
                if run not in self._runs.cancelling:
                    raise  # a shutdown: the group commit, or the store's close, writes it
                self._runs.cancelling.discard(run)
                cancelled = True
        if cancelled and written and status == "paused" and self.store.cancel(run, now):
            self._ended_as(run, live, "cancelled", "cancelled", None, text=None, row=row, at=now)
            return
        self._ended_as(
            run, live, status, reason, body, text=text, row=row if written else None, at=now
        )

    def _ended_as(
        self,
        run: str,
        live: LiveRun | None,
        status: str,
        reason: str,
        body: JsonObject | None,
        *,
        text: str | None,
        row: RunRow | None,
        at: float,
    ) -> None:
        """Tell the streams and waiters of `run` it ended; `row`: as it was before its end
        was stored (None when nothing was)."""
        self.metrics.ended(run, self._clock.monotonic())
        if live is not None:
            live.end()
        self._runs.live.pop(run, None)
        # What the store now holds, for the waiters (no read of what was just written;
        # an answer sends the result's text as stored, not encoded again).
        self._signal(run, row and ended_row(row, status, reason, body, text, at=at))

    def _signal(self, run: str, row: RunRow | None = None) -> None:
        ended = self._runs.ended.pop(run, None)
        if ended is not None:
            ended.row = row
            ended.set()
