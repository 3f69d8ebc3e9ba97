"""One run of the engine loop (DESIGN §1.1). Private: `Engine` builds and awaits a `_Run`.

A `_Run` owns the mutable state of a run (context, dirty keys, Lamport time,
pending and human-rejected proposals). Stops unwind through `_Stop` so that
every rule can stop the run from wherever it is checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from converge_dsl.engine import events as ev
from converge_dsl.engine._admission import Admission, _sorted_keys, _Stop
from converge_dsl.engine.budget import StopReason
from converge_dsl.engine.context import Context
from converge_dsl.engine.invariants import InvariantClass
from converge_dsl.engine.state import EngineState, HitlPause, PendingProposal, RunResult
from converge_dsl.engine.types import (
    AgentEffect,
    ProposedFact,
    Provenance,
    Suggestor,
)
from converge_dsl.errors import ConvergeError, KernelError, RunError

if TYPE_CHECKING:
    from converge_dsl.engine.engine import Engine

_SEED_PROVENANCE = Provenance("seed")
_Outcome = tuple[AgentEffect | BaseException, float]


class _Run(Admission):
    def __init__(
        self,
        engine: Engine,
        state: EngineState,
        on_cycle_end: Callable[[EngineState], None] | None,
    ) -> None:
        self.engine = engine
        self.registry = engine._registry
        self.gate = engine._gate
        self.budget = engine.budget
        self.clock = engine.clock
        self.sink = engine._sink
        self.emitting = engine._sink is not None or engine._record_events
        self.events: list[BaseModel] = []
        self.ctx = Context.from_facts(state.facts, cycle=state.cycle)
        self.dirty: set[str] = set(state.dirty)
        self.lamport = state.lamport
        self.rejected: set[str] = set(state.rejected_ids)
        self.pending: list[PendingProposal] = list(state.pending)
        self.promoted = 0
        self.evidence: dict[str, tuple[str, ...]] = {}
        self.links: dict[tuple[str | None, int], str] = {}
        self.on_cycle_end = on_cycle_end
        self.started = self.clock.monotonic()
        self.inflight: asyncio.Future[list[_Outcome]] | None = None
        engine.usage._restore(state.usage)
        engine.usage.begin(self.started)

    # -- the loop --------------------------------------------------------------

    async def execute(
        self, seeds: Sequence[ProposedFact], staged: Sequence[PendingProposal], resumed: bool
    ) -> RunResult:
        if self.emitting:
            self._emit(
                ev.RunStarted(
                    suggestors=len(self.registry),
                    seeds=len(seeds),
                    resumed_from_cycle=self.ctx.cycle if resumed else None,
                    timing=self._timing(),
                )
            )
        reason, error = StopReason.CONVERGED, None
        try:
            self._seed(seeds, staged)
            if self.pending:
                raise _Stop(StopReason.HITL_PAUSE)
            while True:
                await self._cycle()
        except _Stop as stop:
            reason, error = stop.reason, stop.error
        return self._finish(reason, error)

    def _seed(self, seeds: Sequence[ProposedFact], staged: Sequence[PendingProposal]) -> None:
        """Promote seed facts and human-approved proposals before the first cycle."""
        before = self.ctx.version
        cycle = self.ctx.cycle
        for seed in seeds:
            self._admit(
                "seeds",
                replace(seed, provenance=_SEED_PROVENANCE) if seed.provenance.is_empty else seed,
                cycle,
                gate="seed",
                approver="pipeline",
                hitl=False,
            )
        for item in staged:
            self._admit_checked(
                item.suggestor,
                item.proposal,
                item.cycle,
                gate="human",
                approver="human",
                evidence=(f"suggestor:{item.suggestor}", f"hitl:{item.reason}"),
            )
        if self.ctx.version != before:
            self._check_invariants("structural")

    async def _cycle(self) -> None:
        ctx, budget = self.ctx, self.budget
        if self.engine._cancelled:
            raise _Stop(StopReason.CANCELLED)
        self._check_time()
        cycle = ctx.cycle + 1
        if cycle > budget.max_cycles:
            raise _Stop(StopReason.CYCLE_BUDGET_EXHAUSTED)
        ctx._set_cycle(cycle)
        dirty, self.dirty = self.dirty, set()
        self.promoted = 0
        suggestors = self.registry.suggestors
        accepted: list[Suggestor] = []
        for index in self.registry.candidates(dirty):
            suggestor = suggestors[index]
            try:
                if suggestor.accepts(ctx):
                    accepted.append(suggestor)
            except Exception as exc:
                self._suggestor_failed(suggestor.name, cycle, exc)
        if not accepted and not self.promoted:
            self._converge()
        usage_stop = self.engine.usage.exhausted(reached=True)
        if accepted and usage_stop is not None:
            raise _Stop(usage_stop)
        if self.emitting:
            self._emit(
                ev.CycleStarted(
                    cycle=cycle,
                    dirty_keys=_sorted_keys(dirty),
                    candidates=tuple(s.name for s in accepted),
                    timing=self._timing(),
                )
            )
            for suggestor in accepted:
                self._emit(ev.SuggestorStarted(cycle=cycle, suggestor=suggestor.name))
        outcomes = await self._execute_all(accepted)
        for suggestor, (outcome, duration) in zip(accepted, outcomes, strict=True):
            self._merge(suggestor, outcome, duration, cycle)
        self._check_invariants("semantic")
        # A suggestor refused a model call (an agent stops its loop quietly): the
        # run is out of budget, not at a fixed point.
        usage = self.engine.usage
        usage_stop = usage.exhausted(reached=False) or usage.refused
        if usage_stop is not None:
            raise _Stop(usage_stop)
        self._check_time()
        if self.emitting:
            self._emit(
                ev.CycleFinished(
                    cycle=cycle, promoted=self.promoted, dirty_keys=_sorted_keys(self.dirty)
                )
            )
        if self.pending:
            raise _Stop(StopReason.HITL_PAUSE)
        if not self.promoted:
            self._converge()
        if self.on_cycle_end is not None:
            self.on_cycle_end(self._state())

    def _converge(self) -> None:
        self._check_invariants("acceptance")
        raise _Stop(StopReason.CONVERGED)

    async def _execute_all(self, accepted: list[Suggestor]) -> list[_Outcome]:
        ctx, clock = self.ctx, self.clock
        if not accepted:
            return []
        limit = self.budget.max_concurrency
        semaphore = asyncio.Semaphore(limit) if len(accepted) > limit else None

        async def one(suggestor: Suggestor) -> _Outcome:
            start = clock.monotonic()
            try:
                if semaphore is None:
                    effect: AgentEffect | BaseException = await suggestor.execute(ctx)
                else:
                    async with semaphore:
                        effect = await suggestor.execute(ctx)
            except Exception as exc:
                effect = exc
            return effect, clock.monotonic() - start

        self.inflight = asyncio.gather(*(one(s) for s in accepted))
        try:
            return await self.inflight
        except asyncio.CancelledError:
            if self.engine._cancelled:
                raise _Stop(StopReason.CANCELLED) from None
            raise
        finally:
            self.inflight = None

    # -- merge -----------------------------------------------------------------

    def _merge(self, suggestor: Suggestor, outcome: Any, duration: float, cycle: int) -> None:
        name = suggestor.name
        if isinstance(outcome, BaseException):
            self._suggestor_failed(name, cycle, outcome)
            return
        if not isinstance(outcome, AgentEffect):
            raise _Stop(
                StopReason.ERROR,
                KernelError(
                    f"execute returned {type(outcome).__name__}, not an AgentEffect",
                    suggestor=name,
                    cycle=cycle,
                ),
            )
        proposals = outcome.proposals
        if self.emitting:
            self._emit(
                ev.SuggestorFinished(
                    cycle=cycle,
                    suggestor=name,
                    proposals=len(proposals),
                    timing=self._timing(duration),
                )
            )
        if not proposals:
            return
        before = self.ctx.version
        require = self.gate.policy.require_provenance
        for proposed in proposals:
            proposal = proposed
            if proposal.provenance.is_empty:
                if require:
                    raise _Stop(
                        StopReason.ERROR,
                        KernelError(
                            f"proposal {proposal.key}/{proposal.id} has an empty provenance",
                            hint="every proposal must say where it came from",
                            suggestor=name,
                            cycle=cycle,
                        ),
                    )
                proposal = replace(proposal, provenance=suggestor.provenance())
            self._admit(name, proposal, cycle, gate="auto", approver="engine", hitl=True)
        if self.ctx.version != before:
            self._check_invariants("structural")

    def _suggestor_failed(self, name: str, cycle: int, exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            raise _Stop(StopReason.CANCELLED)
        error = self._as_run_error(name, cycle, exc)
        if self.emitting:
            self._emit(ev.SuggestorFailed(cycle=cycle, suggestor=name, error=str(error)))
        if self.engine.on_error == "stop" or isinstance(exc, KernelError):
            raise _Stop(StopReason.ERROR, error)
        self._engine_fact(
            f"error:{name}:{cycle}",
            {"suggestor": name, "cycle": cycle, "error": error.message},
            cycle,
        )

    @staticmethod
    def _as_run_error(name: str, cycle: int, exc: BaseException) -> RunError:
        if isinstance(exc, RunError):
            if exc.suggestor is None:
                exc.suggestor = name
            if exc.cycle is None:
                exc.cycle = cycle
            return exc
        if isinstance(exc, ConvergeError):
            error = RunError(exc.message, hint=exc.hint, suggestor=name, cycle=cycle)
        else:
            error = RunError(
                f"suggestor raised {type(exc).__name__}: {exc}", suggestor=name, cycle=cycle
            )
        error.__cause__ = exc
        return error

    # -- invariants and budgets --------------------------------------------------

    def _check_invariants(self, invariant_class: InvariantClass) -> None:
        ctx, cycle = self.ctx, self.ctx.cycle
        for invariant in self.engine._invariants[invariant_class]:
            try:
                message = invariant.check(ctx)
            except Exception as exc:
                error = (
                    exc
                    if isinstance(exc, ConvergeError)
                    else RunError(
                        f"invariant {invariant.name!r} raised {type(exc).__name__}: {exc}",
                        cycle=cycle,
                    )
                )
                raise _Stop(StopReason.ERROR, error) from None
            if self.emitting:
                self._emit(
                    ev.InvariantChecked(
                        cycle=cycle,
                        invariant=invariant.name,
                        invariant_class=invariant_class,
                        critical=invariant.critical,
                        holds=message is None,
                        message=message,
                    )
                )
            if message is None:
                continue
            if invariant.critical:
                raise _Stop(
                    StopReason.INVARIANT_VIOLATED,
                    RunError(
                        f"{invariant_class} invariant {invariant.name!r} violated: {message}",
                        cycle=cycle,
                    ),
                )
            self._engine_fact(
                f"invariant:{invariant.name}",
                {"invariant": invariant.name, "class": invariant_class, "message": message},
                cycle,
            )

    def _check_time(self) -> None:
        limit = self.budget.max_wall_s
        if limit is not None and self.clock.monotonic() - self.started > limit:
            raise _Stop(StopReason.TIME_BUDGET_EXHAUSTED)

    # -- results -------------------------------------------------------------------

    def _state(self) -> EngineState:
        return EngineState(
            facts=self.ctx.facts(),
            cycle=self.ctx.cycle,
            dirty=_sorted_keys(self.dirty),
            lamport=self.lamport,
            rejected_ids=tuple(sorted(self.rejected)),
            pending=tuple(self.pending),
            usage=self.engine.usage.totals,
        )

    def _finish(self, reason: StopReason, error: ConvergeError | None) -> RunResult:
        state = self._state()
        pause = None
        if reason is StopReason.HITL_PAUSE:
            self.ctx._set_pending(item.proposal for item in self.pending)
            pause = HitlPause(tuple(self.pending), state)
            if self.emitting:
                self._emit(
                    ev.HitlPaused(cycle=self.ctx.cycle, pending=tuple(p.id for p in self.pending))
                )
        if self.emitting:
            self._emit(
                ev.RunFinished(
                    cycles=self.ctx.cycle,
                    stop_reason=str(reason),
                    facts=self.ctx.version,
                    error=None if error is None else str(error),
                    timing=self._timing(self.clock.monotonic() - self.started),
                )
            )
        return RunResult(
            context=self.ctx,
            cycles=self.ctx.cycle,
            stop_reason=reason,
            state=state,
            usage=state.usage,
            pause=pause,
            error=error,
            events=tuple(self.events) if self.engine._record_events else (),
        )
