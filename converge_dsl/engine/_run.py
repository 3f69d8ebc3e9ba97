"""One run of the engine loop (docs/architecture.md §7).

Engine-internal: `Engine` builds and awaits a `Run`.

A `Run` drives the cycles: it picks the candidates through the registry's
key index, executes them concurrently, and hands their effects, in
registration order, to the run's `Admission`. What the run mutates lives in
its `RunState`; every rule that ends the run raises `Stop`.

The run's deadline (`max_wall_s` after the start, on the injected clock)
cancels the suggestors in flight: while a cycle executes, an event-loop timer
(at the deadline on the system clock; polling any other injected clock)
cancels them all once it passes; the run stops
with `time_budget_exhausted` and merges nothing from that cycle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, cast

from converge_dsl._collector import quiet_collector
from converge_dsl.clock import Clock, SystemClock
from converge_dsl.engine import events as ev
from converge_dsl.engine._admission import Admission
from converge_dsl.engine._explain import explain
from converge_dsl.engine._opening import Decided, emit_opening, emit_still_pending
from converge_dsl.engine._registry import Registry
from converge_dsl.engine._runstate import EventLog, RunState, Stop, sorted_keys
from converge_dsl.engine.budget import SPENDER, Budget, StopReason
from converge_dsl.engine.events import from_fields
from converge_dsl.engine.state import EngineState, HitlPause, RunResult
from converge_dsl.engine.types import AgentEffect, ProposedFact, Suggestor, SyncSuggestor
from converge_dsl.errors import ConvergeError, KernelError, RunError
from converge_dsl.sandbox import DeadlinePassed, Exhausted, run_deadline

# (effect or failure, seconds it ran, monotonic time it finished)
_Outcome = tuple[AgentEffect | BaseException, float, float]
# How often the deadline watcher reads an injected (non-system) clock, in real
# seconds: the run stops at most this long after its deadline, plus the time the
# cancelled calls take to unwind.
_DEADLINE_POLL_S = 0.02


class Run:
    """One run, from the seeds to its stop. Single use: `execute` once.

    `stop_on_error` is the engine's `on_error == "stop"`: a failing suggestor
    stops the run instead of becoming a `diagnostic` fact. `on_cycle_end`
    receives the state after every cycle the run continues from.
    """

    __slots__ = (
        "_admission",
        "_budget",
        "_cancelled",
        "_clock",
        "_inflight",
        "_log",
        "_on_cycle_end",
        "_registry",
        "_started",
        "_state",
        "_stop_on_error",
        "_timed_out",
    )

    def __init__(
        self,
        *,
        state: RunState,
        admission: Admission,
        registry: Registry,
        log: EventLog,
        budget: Budget,
        clock: Clock,
        stop_on_error: bool,
        on_cycle_end: Callable[[EngineState], None] | None,
    ) -> None:
        self._state = state
        self._admission = admission
        self._registry = registry
        self._log = log
        self._budget = budget
        self._clock = clock
        self._stop_on_error = stop_on_error
        self._on_cycle_end = on_cycle_end
        self._cancelled = False
        self._timed_out = False
        self._inflight: asyncio.Future[Any] | None = None
        self._started = clock.monotonic()
        state.usage.begin(self._started)

    def cancel(self) -> None:
        """Stop as soon as possible with `cancelled`; in-flight `execute` calls are cancelled."""
        self._cancelled = True
        if self._inflight is not None:
            self._inflight.cancel()

    # -- the loop --------------------------------------------------------------

    async def execute(
        self, seeds: Sequence[ProposedFact], decided: Sequence[Decided], resumed: bool
    ) -> RunResult:
        """Promote `seeds` and the proposals a human approved (`decided`), run cycles to a stop."""
        log, ctx = self._log, self._state.context
        emit_opening(
            log,
            suggestors=len(self._registry),
            seeds=len(seeds),
            resumed_from=ctx.cycle if resumed else None,
            budget=self._budget,
            decided=decided,
        )
        staged = [item for item, approve, _ in decided if approve]
        wall = self._budget.max_wall_s
        try:
            # Every template, expression and validation of the run checks its deadline.
            # The objects older than the run are frozen for it (see `quiet_collector`).
            with (
                run_deadline(self._clock, None if wall is None else self._started + wall),
                quiet_collector(),
            ):
                self._admission.seed(seeds, staged)
                if self._state.pending:
                    emit_still_pending(log, self._state.pending)
                    raise Stop(StopReason.HITL_PAUSE)
                while True:
                    # A cycle whose suggestors are all synchronous awaits nothing.
                    cycle, accepted, synchronous = self._open_cycle()
                    if all(synchronous):
                        outcomes = [self._inline(cast(SyncSuggestor, s)) for s in accepted]
                    else:
                        outcomes = await self._execute_all(accepted, synchronous)
                    self._close_cycle(cycle, accepted, outcomes)
        except Stop as stop:
            return self._finish(stop)

    def _open_cycle(self) -> tuple[int, list[Suggestor], list[bool]]:
        """Start the next cycle: its number, its accepted suggestors and which of them are
        synchronous; raises `Stop` instead when the run ends before it."""
        state, log = self._state, self._log
        if self._cancelled:
            raise Stop(StopReason.CANCELLED)
        self._check_time()
        cycle = state.context.cycle + 1
        if cycle > self._budget.max_cycles:
            raise Stop(StopReason.CYCLE_BUDGET_EXHAUSTED)
        state.writer.set_cycle(cycle)
        dirty, state.dirty = state.dirty, set()
        state.promoted = 0
        accepted, synchronous = self._accepted(dirty, cycle)
        if not accepted and not state.promoted:
            self._converge()
        usage_stop = state.usage.stop_before_cycle()
        if accepted and usage_stop is not None:
            raise Stop(usage_stop)
        if log.enabled:
            log.emit(
                from_fields(
                    ev.CycleStarted,
                    {
                        "cycle": cycle,
                        "dirty_keys": sorted_keys(dirty),
                        "candidates": tuple(s.name for s in accepted),
                        "timing": log.timing(),
                    },
                )
            )
            for suggestor in accepted:
                log.emit(
                    from_fields(
                        ev.SuggestorStarted,
                        {"cycle": cycle, "suggestor": suggestor.name, "timing": log.timing()},
                    )
                )
        return cycle, accepted, synchronous

    def _close_cycle(self, cycle: int, accepted: list[Suggestor], outcomes: list[_Outcome]) -> None:
        """Merge the cycle's outcomes in registration order and end it."""
        for suggestor, (outcome, duration, end) in zip(accepted, outcomes, strict=True):
            self._merge(suggestor, outcome, duration, end, cycle)
        self._admission.check_invariants("semantic")
        self._end_cycle(cycle)

    def _accepted(self, dirty: set[str], cycle: int) -> tuple[list[Suggestor], list[bool]]:
        """The candidates under `dirty` (and the always-candidates) whose `accepts` is true,
        and which of them are synchronous (as registered: `Registry.synchronous`)."""
        ctx = self._state.context
        registry = self._registry
        suggestors, synchronous = registry.suggestors, registry.synchronous
        accepted: list[Suggestor] = []
        flags: list[bool] = []
        for index in registry.candidates(dirty):
            suggestor = suggestors[index]
            try:
                if suggestor.accepts(ctx):
                    accepted.append(suggestor)
                    flags.append(synchronous[index])
            except Exception as exc:
                self._suggestor_failed(suggestor.name, cycle, exc)
        return accepted, flags

    def _end_cycle(self, cycle: int) -> None:
        state, log = self._state, self._log
        # A suggestor refused a model call (an agent stops its loop quietly): the
        # run is out of budget, not at a fixed point.
        usage = state.usage
        usage_stop = usage.exhausted(reached=False) or usage.refused
        if usage_stop is not None:
            raise Stop(usage_stop)
        self._check_time()
        if log.enabled:
            totals = usage.totals
            log.emit(
                from_fields(
                    ev.CycleFinished,
                    {
                        "cycle": cycle,
                        "promoted": state.promoted,
                        "dirty_keys": sorted_keys(state.dirty),
                        "facts": state.context.version,
                        "model_calls": totals.model_calls,
                        "input_tokens": totals.input_tokens,
                        "output_tokens": totals.output_tokens,
                        "timing": log.timing(),
                    },
                )
            )
        if state.pending:
            raise Stop(StopReason.HITL_PAUSE)
        if not state.promoted:
            self._converge()
        if self._on_cycle_end is not None:
            self._on_cycle_end(state.snapshot())

    def _converge(self) -> None:
        self._admission.check_invariants("acceptance")
        raise Stop(StopReason.CONVERGED)

    async def _execute_all(self, accepted: list[Suggestor], inline: list[bool]) -> list[_Outcome]:
        """Every accepted suggestor's outcome, in registration order.

        A synchronous suggestor (`SyncSuggestor`: no I/O, no model call) runs
        inline, with no task; the others run concurrently on the event loop.
        Which runs first does not matter: they read the same view, and their
        effects merge in registration order (docs/architecture.md §7).
        """
        done = {
            i: self._inline(cast(SyncSuggestor, s)) for i, s in enumerate(accepted) if inline[i]
        }
        awaited = iter(await self._gather([s for i, s in enumerate(accepted) if not inline[i]]))
        return [done[i] if inline[i] else next(awaited) for i in range(len(accepted))]

    def _inline(self, suggestor: SyncSuggestor) -> _Outcome:
        clock = self._clock
        start = clock.monotonic()
        try:
            effect: AgentEffect | BaseException = suggestor.propose(self._state.context)
        except Exception as exc:
            effect = exc
        end = clock.monotonic()
        return effect, end - start, end

    async def _gather(self, waiting: list[Suggestor]) -> list[_Outcome]:
        ctx, clock = self._state.context, self._clock
        limit = self._budget.max_concurrency
        semaphore = asyncio.Semaphore(limit) if len(waiting) > limit else None
        unfinished = {suggestor.name for suggestor in waiting}

        async def one(suggestor: Suggestor) -> _Outcome:
            SPENDER.set(suggestor.name)  # this task's own context: its usage is the suggestor's
            start = clock.monotonic()
            try:
                if semaphore is None:
                    effect: AgentEffect | BaseException = await suggestor.execute(ctx)
                else:
                    async with semaphore:
                        effect = await suggestor.execute(ctx)
            except Exception as exc:
                effect = exc
            unfinished.discard(suggestor.name)
            end = clock.monotonic()
            return effect, end - start, end

        # A lone suggestor is awaited as its task, with no gather around it.
        task = asyncio.create_task(one(waiting[0])) if len(waiting) == 1 else None
        outer = asyncio.current_task()
        cancels_before = 0 if outer is None else outer.cancelling()
        gathered: asyncio.Future[list[_Outcome]] | asyncio.Task[_Outcome] = (
            task if task is not None else asyncio.gather(*(one(s) for s in waiting))
        )
        self._inflight = gathered
        wall = self._budget.max_wall_s
        deadline = (
            None
            if wall is None
            else _Deadline(self._clock, self._started + wall, partial(self._expire, gathered))
        )
        try:
            if task is None:
                return await cast("asyncio.Future[list[_Outcome]]", gathered)
            outcome = await task
            # It returned though cancelled: cancelled, as a gather would be, when the run
            # (its deadline, `cancel`) or its caller cancelled it; not when the suggestor
            # cancelled itself and went on (a library's own timeout), as in a gather.
            cut = self._cancelled or self._timed_out
            if cut or (outer is not None and outer.cancelling() > cancels_before):
                raise asyncio.CancelledError
            return [outcome]
        except asyncio.CancelledError:
            flight = tuple(s.name for s in waiting if s.name in unfinished)
            if self._cancelled:
                raise Stop(StopReason.CANCELLED, in_flight=flight) from None
            if self._timed_out:
                self._log_deadline(flight)
                raise Stop(StopReason.TIME_BUDGET_EXHAUSTED, in_flight=flight) from None
            raise
        finally:
            self._inflight = None
            if deadline is not None:
                deadline.disarm()

    def _log_deadline(self, names: tuple[str, ...]) -> None:
        """Trace the suggestors the deadline cancelled in flight (their effects are dropped)."""
        log, cycle = self._log, self._state.context.cycle
        if log.enabled:
            for name in names:
                error = "cancelled in flight at the run's deadline (max_wall_s)"
                fields = {"cycle": cycle, "suggestor": name, "error": error}
                log.emit(from_fields(ev.SuggestorFailed, fields))

    def _expire(self, inflight: asyncio.Future[Any]) -> None:
        """The deadline passed while `inflight` ran: cancel it (the run stops on its time)."""
        self._timed_out = True
        inflight.cancel()

    # -- outcomes ------------------------------------------------------------------

    def _merge(
        self, suggestor: Suggestor, outcome: object, duration: float, end: float, cycle: int
    ) -> None:
        name, state = suggestor.name, self._state
        state.ran[name] = state.ran.get(name, 0) + 1
        state.busy[name] = state.busy.get(name, 0.0) + duration
        # The execution's own end and duration: a timeline draws it from end - duration.
        timing = (
            from_fields(ev.Timing, {"at": end, "duration_s": duration})
            if self._log.enabled
            else None
        )
        if isinstance(outcome, BaseException):
            self._suggestor_failed(name, cycle, outcome, timing)
            return
        if not isinstance(outcome, AgentEffect):
            raise Stop(
                StopReason.ERROR,
                KernelError(
                    f"execute returned {type(outcome).__name__}, not an AgentEffect",
                    suggestor=name,
                    cycle=cycle,
                ),
            )
        proposals = outcome.proposals
        log = self._log
        if log.enabled:
            log.emit(
                from_fields(
                    ev.SuggestorFinished,
                    {
                        "cycle": cycle,
                        "suggestor": name,
                        "proposals": len(proposals),
                        "timing": timing,
                    },
                )
            )
        if proposals:
            self._admission.merge(suggestor, proposals, cycle)

    def _suggestor_failed(
        self, name: str, cycle: int, exc: BaseException, timing: ev.Timing | None = None
    ) -> None:
        if isinstance(exc, asyncio.CancelledError):
            raise Stop(StopReason.CANCELLED)
        if isinstance(exc, Exhausted) and exc.code is not None:  # a located schema check
            timed_out = isinstance(exc, DeadlinePassed)
            reason = StopReason.TIME_BUDGET_EXHAUSTED if timed_out else StopReason.ERROR
            raise Stop(reason, _as_run_error(name, cycle, exc), code=exc.code, suggestor=name)
        self._check_time()  # a failure past the deadline is the deadline's
        error = _as_run_error(name, cycle, exc)
        if self._log.enabled:
            timing = timing or self._log.timing()
            fields = {"cycle": cycle, "suggestor": name, "error": str(error), "timing": timing}
            self._log.emit(from_fields(ev.SuggestorFailed, fields))
        if self._stop_on_error or isinstance(exc, KernelError):
            raise Stop(StopReason.ERROR, error)
        self._admission.engine_fact(
            f"error:{name}:{cycle}",
            f"suggestor {name!r} failed in cycle {cycle}: {error.coded_message}",
            {"suggestor": name, "cycle": cycle, "error": error.coded_message},
            cycle,
        )

    def _check_time(self) -> None:
        limit = self._budget.max_wall_s
        if limit is not None and self._clock.monotonic() - self._started > limit:
            raise Stop(StopReason.TIME_BUDGET_EXHAUSTED)

    # -- result ----------------------------------------------------------------------

    def _finish(self, stop: Stop) -> RunResult:
        state, log = self._state, self._log
        reason, error = stop.reason, stop.error
        ctx = state.context
        snapshot = state.snapshot()
        pause = None
        if reason is StopReason.HITL_PAUSE:
            state.writer.set_pending(item.proposal for item in state.pending)
            pause = HitlPause(tuple(state.pending), snapshot)
            if log.enabled:
                pending = tuple(p.id for p in state.pending)
                log.emit(from_fields(ev.HitlPaused, {"cycle": ctx.cycle, "pending": pending}))
        if log.enabled:
            log.emit(
                from_fields(
                    ev.RunFinished,
                    {
                        "cycles": ctx.cycle,
                        "stop_reason": str(reason),
                        "facts": ctx.version,
                        "error": None if error is None else str(error),
                        "timing": log.timing(self._clock.monotonic() - self._started),
                    },
                )
            )
        return RunResult(
            context=ctx,
            cycles=ctx.cycle,
            stop_reason=reason,
            state=snapshot,
            usage=snapshot.usage,
            pause=pause,
            error=error,
            events=log.recorded(),
            notes=explain(stop, state, self._budget, self._registry.names),
        )


class _Deadline:
    """Calls `expire` once `clock` reaches `deadline`, from an event-loop timer (no task);
    `disarm` when what it guards finished first.

    The system clock is the event loop's monotonic clock: one timer at the deadline
    does. Any other clock moves only when something sleeps on it or advances it: it is
    polled every `_DEADLINE_POLL_S` real seconds, and read only after a first pause (a
    test clock may tick when read, and a short cycle should not move it).
    """

    __slots__ = ("_clock", "_deadline", "_expire", "_handle", "_loop")

    def __init__(self, clock: Clock, deadline: float, expire: Callable[[], None]) -> None:
        self._clock, self._deadline, self._expire = clock, deadline, expire
        self._loop = asyncio.get_running_loop()
        if isinstance(clock, SystemClock):
            delay = max(0.0, deadline - clock.monotonic())
            self._handle = self._loop.call_later(delay, expire)
        else:
            self._handle = self._loop.call_later(_DEADLINE_POLL_S, self._poll)

    def _poll(self) -> None:
        if self._clock.monotonic() < self._deadline:
            self._handle = self._loop.call_later(_DEADLINE_POLL_S, self._poll)
        else:
            self._expire()

    def disarm(self) -> None:
        self._handle.cancel()


def _as_run_error(name: str, cycle: int, exc: BaseException) -> RunError:
    """`exc` as a `RunError` of suggestor `name` in `cycle` (a `RunError` is completed in place)."""
    if isinstance(exc, RunError):
        if exc.suggestor is None:
            exc.suggestor = name
        if exc.cycle is None:
            exc.cycle = cycle
        return exc
    if isinstance(exc, ConvergeError):
        error = RunError(exc.message, hint=exc.hint, code=exc.code, suggestor=name, cycle=cycle)
    else:
        error = RunError(
            f"suggestor raised {type(exc).__name__}: {exc}", suggestor=name, cycle=cycle
        )
    error.__cause__ = exc
    return error
