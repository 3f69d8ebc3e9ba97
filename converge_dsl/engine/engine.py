"""The engine: runs registered suggestors over a context to a fixed point (docs/architecture.md §7).

One `run`:
1. seeds (and, on `resume`, human-approved proposals) are promoted first;
   the keys that received facts are the first dirty keys;
2. each cycle: `cycle += 1` (over `max_cycles` -> `cycle_budget_exhausted`);
   candidates are the suggestors indexed under a dirty key plus those with no
   dependencies, kept if `accepts()`, in registration order;
3. no candidate -> acceptance invariants -> `converged`;
4. candidates `execute` concurrently (at most `max_concurrency` at once);
   at the run's deadline (`max_wall_s`) the ones still executing are
   cancelled, and the run stops `time_budget_exhausted` keeping nothing of
   that cycle;
5. effects merge in registration order whatever order they finished in:
   kernel rules (provenance, known key, same id = same content), then the
   promotion gate (rejections become `diagnostic` facts
   `validation:rejected:{id}`; gated proposals wait for a human);
6. structural invariants after each merge, semantic ones at the end of the
   cycle; usage and time budgets are checked; a cycle with proposals pending
   a human stops with `hitl_pause`; a cycle that promoted nothing is the
   fixed point (acceptance invariants, then `converged`).

Suggestors must keep no state of their own between cycles (all state lives in
facts); that is what makes a run resumable from any `EngineState`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Literal

from converge_dsl import codes
from converge_dsl.clock import Clock, SystemClock
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.engine._admission import Admission
from converge_dsl.engine._registry import Registry
from converge_dsl.engine._run import Run
from converge_dsl.engine._runstate import EventLog, RunState
from converge_dsl.engine.budget import Budget, UsageMeter
from converge_dsl.engine.events import EventSink
from converge_dsl.engine.invariants import INVARIANT_CLASSES, Invariant, InvariantClass
from converge_dsl.engine.policy import PromotionPolicy, gate_of
from converge_dsl.engine.state import EngineState, HitlPause, PendingProposal, RunResult
from converge_dsl.engine.types import ProposedFact, Suggestor
from converge_dsl.errors import ConvergeError, UsageError
from converge_dsl.keys import BUILTIN_KEYS

OnError = Literal["stop", "diagnose"]
_DEFAULT_BUDGET = Budget()
_DEFAULT_POLICY = PromotionPolicy()


class Engine:
    """Registers suggestors and runs them to a fixed point.

    `events` receives every event as it happens; `record_events` keeps them in
    `RunResult.events` too (turn it off for very large runs). `usage` is the
    run's usage meter when the caller made it first (to hand it to suggestors
    and models before the engine exists; it should meter `budget` on `clock`);
    by default the engine makes its own; model-backed suggestors reserve each
    call in it before making it. One engine runs one run at a time.
    """

    def __init__(
        self,
        *,
        budget: Budget = _DEFAULT_BUDGET,
        policy: PromotionPolicy = _DEFAULT_POLICY,
        invariants: Iterable[Invariant] = (),
        clock: Clock | None = None,
        on_error: OnError = "stop",
        declared_keys: Sequence[str] = (),
        events: EventSink | None = None,
        record_events: bool = True,
        usage: UsageMeter | None = None,
    ) -> None:
        if on_error not in ("stop", "diagnose"):
            raise ValueError(f"on_error must be 'stop' or 'diagnose', not {on_error!r}")
        self.budget = budget
        self.policy = policy
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.on_error: OnError = on_error
        self._gate = gate_of(policy)
        self._known_keys = frozenset(BUILTIN_KEYS) | frozenset(declared_keys)
        self._registry = Registry(self._known_keys)
        self._invariants: dict[InvariantClass, list[Invariant]] = {c: [] for c in INVARIANT_CLASSES}
        for invariant in invariants:
            self._invariants[invariant.invariant_class].append(invariant)
        self._sink = events
        self._record_events = record_events
        self._usage = usage if usage is not None else UsageMeter(budget, clock=self.clock)
        self._current: Run | None = None

    def register(self, suggestor: Suggestor) -> None:
        """Add a suggestor; registration order is merge order. A duplicate name is an error."""
        self._registry.register(suggestor)

    def register_all(self, suggestors: Iterable[Suggestor]) -> None:
        """`register` each, in order (a tuple registered before is not checked again)."""
        if isinstance(suggestors, tuple):
            self._registry.register_many(suggestors)
            return
        for suggestor in suggestors:
            self._registry.register(suggestor)

    @property
    def suggestors(self) -> tuple[Suggestor, ...]:
        return tuple(self._registry.suggestors)

    @property
    def usage(self) -> UsageMeter:
        """The usage meter of the current (or last) run; LLM suggestors record into it."""
        return self._usage

    def cancel(self) -> None:
        """Stop the current run as soon as possible with stop reason `cancelled`.

        In-flight `execute` calls are cancelled. Call it on the run's event loop
        (from another thread: `loop.call_soon_threadsafe(engine.cancel)`).
        """
        run = self._current
        if run is not None:
            run.cancel()

    async def run(
        self,
        seeds: Sequence[ProposedFact] = (),
        *,
        resume_from: EngineState | None = None,
        on_cycle_end: Callable[[EngineState], None] | None = None,
    ) -> RunResult:
        """Run to a stop. `resume_from` continues from a state (seeds then add to it).

        `on_cycle_end` receives the state after every cycle the run continues from
        (what checkpoints are made of).
        """
        return await self._start(seeds, resume_from, (), on_cycle_end)

    async def resume(
        self,
        pause: HitlPause,
        decisions: Mapping[str, bool],
        *,
        on_cycle_end: Callable[[EngineState], None] | None = None,
        decided_by: Mapping[str, str] | None = None,
    ) -> RunResult:
        """Continue a paused run; `decisions` maps each pending id to approve (True) or not.

        Each decision is emitted as a `ProposalDecided` event, with who gave it
        (`decided_by`: id -> `cli`, `file:NAME`, `api`) when known; approved proposals
        are promoted first (gate `human`); rejected ids are remembered and
        silently dropped if proposed again.
        """
        ids = [item.id for item in pause.pending]
        unknown = [key for key in decisions if key not in ids]
        if unknown:
            close = did_you_mean(unknown[0], ids)
            raise UsageError(
                f"no pending proposal has id {unknown[0]!r}",
                hint=suggestion(close) if close else f"pending: {', '.join(ids)}",
                code=codes.INPUT_REFUSED,
            )
        undecided = [item for item in ids if item not in decisions]
        if undecided:
            raise UsageError(
                f"no decision for pending proposal(s): {', '.join(undecided)}",
                hint="approve or reject every pending proposal",
                code=codes.INPUT_REFUSED,
            )
        by = decided_by or {}
        decided = tuple((item, bool(decisions[item.id]), by.get(item.id)) for item in pause.pending)
        rejected = {item.id for item, approve, _ in decided if not approve}
        state = replace(
            pause.state,
            pending=(),
            rejected_ids=tuple(sorted(set(pause.state.rejected_ids) | rejected)),
        )
        return await self._start((), state, decided, on_cycle_end)

    async def _start(
        self,
        seeds: Sequence[ProposedFact],
        state: EngineState | None,
        decided: Sequence[tuple[PendingProposal, bool, str | None]],
        on_cycle_end: Callable[[EngineState], None] | None,
    ) -> RunResult:
        if self._current is not None:
            raise ConvergeError(
                "this engine is already running; one engine runs one run at a time",
                code=codes.API_MISUSE,
            )
        run = self._current = self._build_run(state or EngineState(), on_cycle_end)
        try:
            return await run.execute(seeds, decided, resumed=state is not None)
        finally:
            self._current = None

    def _build_run(
        self, state: EngineState, on_cycle_end: Callable[[EngineState], None] | None
    ) -> Run:
        """A run continuing from `state`, wired to this engine's parts; the usage meter restarts."""
        run_state = RunState.restore(state, self._usage)
        log = EventLog(self._sink, record=self._record_events, clock=self.clock)
        admission = Admission(
            state=run_state,
            gate=self._gate,
            known_keys=self._known_keys,
            max_facts=self.budget.max_facts,
            invariants=self._invariants,
            log=log,
        )
        return Run(
            state=run_state,
            admission=admission,
            registry=self._registry,
            log=log,
            budget=self.budget,
            clock=self.clock,
            stop_on_error=self.on_error == "stop",
            on_cycle_end=on_cycle_end,
        )
