"""The run's parts work on their own: run state, event log and admission need no `Engine`."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from converge_dsl.clock import FakeClock
from converge_dsl.engine import (
    Budget,
    Engine,
    EngineState,
    FactPromoted,
    PendingProposal,
    PromotionGate,
    PromotionPolicy,
    ProposedFact,
    Provenance,
    StopReason,
    Timing,
    UsageMeter,
    UsageTotals,
)
from converge_dsl.engine._admission import Admission
from converge_dsl.engine._runstate import EventLog, RunState, Stop
from converge_dsl.engine.invariants import INVARIANT_CLASSES
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.errors import ConvergeError
from converge_dsl.keys import BUILTIN_KEYS


def _proposal(fact_id: str, content: str = "x", key: str = "signals") -> ProposedFact:
    return ProposedFact(key, fact_id, content, 0.9, Provenance("p"))


def _parts(
    state: EngineState | None = None, *, max_facts: int = 100
) -> tuple[RunState, Admission, list[BaseModel]]:
    sink: list[BaseModel] = []
    run_state = RunState.restore(state or EngineState(), UsageMeter(Budget()))
    admission = Admission(
        state=run_state,
        gate=PromotionGate(PromotionPolicy(gated_keys=("strategies",))),
        known_keys=frozenset(BUILTIN_KEYS),
        max_facts=max_facts,
        invariants={c: [] for c in INVARIANT_CLASSES},
        log=EventLog(sink.append, record=False, clock=FakeClock()),
    )
    return run_state, admission, sink


def test_run_state_restores_and_snapshots_an_engine_state() -> None:
    run_state, admission, _ = _parts()
    admission.admit("s", _proposal("a"), 1, gate="auto", approver="engine", hitl=True)
    snapshot = run_state.snapshot()
    again, _, _ = _parts(snapshot)
    assert again.snapshot() == snapshot
    assert snapshot.dirty == ("signals",)
    assert snapshot.lamport == 1


def test_restoring_a_run_state_resets_the_usage_meter() -> None:
    meter = UsageMeter(Budget())
    meter.record(model_calls=5, input_tokens=7)
    run_state = RunState.restore(EngineState(usage=UsageTotals(2, 3, 4)), meter)
    assert meter.totals == UsageTotals(2, 3, 4)
    assert run_state.snapshot().usage == UsageTotals(2, 3, 4)


def test_admission_promotes_holds_for_a_human_and_ignores_repeats() -> None:
    run_state, admission, sink = _parts()
    admission.admit("s", _proposal("a"), 1, gate="auto", approver="engine", hitl=True)
    admission.admit("s", _proposal("a"), 1, gate="auto", approver="engine", hitl=True)
    admission.admit(
        "s", _proposal("h", key="strategies"), 1, gate="auto", approver="engine", hitl=True
    )
    assert [f.id for f in run_state.context.facts()] == ["a"]
    assert [p.id for p in run_state.pending] == ["h"]
    assert run_state.promoted == 1
    assert [type(e).__name__ for e in sink] == ["FactPromoted", "ProposalPending"]
    assert isinstance(sink[0], FactPromoted)
    assert sink[0].logical_time == 1


def test_admission_stops_the_run_on_a_conflict_and_over_the_fact_budget() -> None:
    _, admission, _ = _parts(max_facts=1)
    admission.admit("s", _proposal("a"), 1, gate="auto", approver="engine", hitl=True)
    with pytest.raises(Stop) as conflict:
        admission.admit("s", _proposal("a", "y"), 1, gate="auto", approver="engine", hitl=True)
    assert conflict.value.reason is StopReason.ERROR
    with pytest.raises(Stop) as full:
        admission.admit("s", _proposal("b"), 1, gate="auto", approver="engine", hitl=True)
    assert full.value.reason is StopReason.FACT_BUDGET_EXHAUSTED


def test_a_pending_proposal_blocks_a_different_one_with_the_same_id() -> None:
    pending = PendingProposal(_proposal("h", key="strategies"), "s", 1, "hitl")
    _, admission, _ = _parts(EngineState(pending=(pending,)))
    with pytest.raises(Stop):
        admission.admit(
            "t", _proposal("h", "other", key="strategies"), 2, gate="auto", approver="e", hitl=True
        )


def test_a_cancel_before_a_run_does_not_cancel_the_next_run() -> None:
    engine = Engine(budget=Budget(max_cycles=3))
    engine.register(FnSuggestor("s", [], lambda ctx: [_proposal("a")]))
    engine.cancel()
    assert asyncio.run(engine.run()).stop_reason is StopReason.CONVERGED


def test_a_synchronous_suggestor_runs_inline_on_the_runs_own_task() -> None:
    from converge_dsl.engine.testing import SyncFnSuggestor

    tasks: list[object] = []

    def propose(ctx: object) -> list[ProposedFact]:
        tasks.append(asyncio.current_task())
        return [_proposal("inline")]

    inline = SyncFnSuggestor("inline", ["seeds"], propose)
    awaited = FnSuggestor("awaited", ["seeds"], lambda ctx: [_proposal("awaited")])
    engine = Engine()
    engine.register_all([inline, awaited])

    async def run() -> tuple[object, object]:
        result = await engine.run([ProposedFact("seeds", "s", "go", 1.0, Provenance("seed"))])
        return result, asyncio.current_task()

    result, run_task = asyncio.run(run())
    assert result.converged  # type: ignore[attr-defined]
    assert [f.id for f in result.context.get("signals")] == ["inline", "awaited"]  # type: ignore[attr-defined]
    # `accepts` asks `propose` too; every call ran on the run's task, none in a task of its own.
    assert tasks
    assert all(task is run_task for task in tasks)
    assert inline.calls == 1
    assert awaited.calls == 1


def test_a_tuple_registered_again_is_copied_and_still_refuses_duplicates() -> None:
    from converge_dsl.engine import _registry

    made = tuple(FnSuggestor(f"s{i}", ["seeds"], lambda ctx: []) for i in range(3))
    first, second = Engine(), Engine()
    first.register_all(made)
    checks: list[object] = []
    real = _registry.Registry.register

    def counted(self: object, suggestor: object) -> None:
        checks.append(suggestor)
        real(self, suggestor)  # type: ignore[arg-type]

    _registry.Registry.register = counted  # type: ignore[method-assign]
    try:
        second.register_all(made)
        assert checks == []  # copied from the first registry, not checked again
        assert second.suggestors == first.suggestors
        second.register(FnSuggestor("extra", [], lambda ctx: []))
        assert len(first.suggestors) == 3  # the copy is its own
        with pytest.raises(ConvergeError, match="registered twice"):
            second.register(FnSuggestor("s1", [], lambda ctx: []))
    finally:
        _registry.Registry.register = real  # type: ignore[method-assign]


def test_a_run_of_synchronous_suggestors_never_suspends() -> None:
    """Every cycle runs inline: the run's coroutine finishes at its first step."""
    from converge_dsl.engine.testing import SyncFnSuggestor

    engine = Engine()
    engine.register_all(
        [
            SyncFnSuggestor("a", ["seeds"], lambda ctx: [_proposal("a")]),
            SyncFnSuggestor("b", ["signals"], lambda ctx: [_proposal("b", key="hypotheses")]),
        ]
    )
    step = engine.run([ProposedFact("seeds", "s", "go", 1.0, Provenance("seed"))])
    with pytest.raises(StopIteration) as done:
        step.send(None)
    result = done.value.value
    assert result.converged
    assert [f.id for f in result.context.facts()] == ["s", "a", "b"]


def test_the_registry_lists_candidates_in_order_and_which_run_inline() -> None:
    from converge_dsl.engine._registry import Registry
    from converge_dsl.engine.testing import SyncFnSuggestor

    registry = Registry(frozenset(BUILTIN_KEYS))
    made = (
        SyncFnSuggestor("a", ["signals", "seeds", "signals"], lambda ctx: []),
        FnSuggestor("b", ["seeds"], lambda ctx: []),
        SyncFnSuggestor("c", ["signals"], lambda ctx: []),
    )
    registry.register_many(made)
    assert registry.synchronous == [True, False, True]
    assert list(registry.candidates({"seeds"})) == [0, 1]
    assert list(registry.candidates({"signals"})) == [0, 2]
    assert list(registry.candidates({"signals", "seeds"})) == [0, 1, 2]
    assert list(registry.candidates({"strategies"})) == []
    copy = Registry(frozenset(BUILTIN_KEYS))
    copy.register_many(made)  # copied from the first registry
    assert copy.synchronous == [True, False, True]
    copy.register(FnSuggestor("d", [], lambda ctx: []))  # an always-candidate
    assert copy.synchronous == [True, False, True, False]
    assert list(copy.candidates({"signals"})) == [0, 2, 3]
    assert list(copy.candidates(set())) == [3]
    assert registry.synchronous == [True, False, True]  # the copy is its own


def test_the_facts_of_one_merge_share_one_promotion_record() -> None:
    from converge_dsl.engine import PromotionRecord

    engine = Engine()
    engine.register(
        FnSuggestor("s", ["seeds"], lambda ctx: [_proposal("a"), _proposal("b"), _proposal("c")])
    )
    engine.register(FnSuggestor("t", ["signals"], lambda ctx: [_proposal("d", key="hypotheses")]))
    result = asyncio.run(engine.run([ProposedFact("seeds", "s", "go", 1.0, Provenance("seed"))]))
    a, b, c = result.context.get("signals")
    (d,) = result.context.get("hypotheses")
    assert a._basis is b._basis is c._basis
    assert a.promotion == PromotionRecord("auto", "engine", 1, ("suggestor:s",), "cycle/1/s", 2)
    assert c.promotion.logical_time == 4
    assert d.promotion == PromotionRecord("auto", "engine", 2, ("suggestor:t",), "cycle/2/t", 5)
    shared = PromotionRecord.shared("auto", "engine", 2, ("suggestor:t",), "cycle/2/t")
    assert shared == PromotionRecord("auto", "engine", 2, ("suggestor:t",), "cycle/2/t")
    assert hash(shared) == hash(PromotionRecord("auto", "engine", 2, ("suggestor:t",), "cycle/2/t"))


def test_a_suggestor_registered_during_a_cycle_joins_the_next_one() -> None:
    """Registered from an `accepts` of the cycle under way, under the same dirty key:
    not among that cycle's candidates (the candidates are a copy)."""
    from converge_dsl.engine import CycleStarted

    engine = Engine()
    late = FnSuggestor("late", ["seeds"], lambda ctx: [_proposal("late", key="hypotheses")])

    def first(ctx: object) -> list[ProposedFact]:
        return [_proposal("first")]

    class Registering(FnSuggestor):
        def accepts(self, ctx: object) -> bool:
            if "late" not in {s.name for s in engine.suggestors}:
                engine.register(late)
            return True

    engine.register(Registering("first", ["seeds"], first))
    result = asyncio.run(engine.run([ProposedFact("seeds", "s", "go", 1.0, Provenance("seed"))]))
    cycles = [e.candidates for e in result.events if isinstance(e, CycleStarted)]
    assert cycles[0] == ("first",)
    assert late.calls == 0  # seeds is not dirty again after the first cycle


def test_whether_a_suggestor_runs_inline_is_read_when_it_is_registered() -> None:
    """A suggestor synchronous when registered runs inline (`propose`) in every cycle,
    also beside an awaited one, whatever its `synchronous` says later."""
    from converge_dsl.engine.testing import SyncFnSuggestor
    from converge_dsl.engine.types import AgentEffect, ContextView

    class Flip(SyncFnSuggestor):
        async def execute(self, ctx: ContextView) -> AgentEffect:
            raise AssertionError("awaited, although synchronous when registered")

    flip = Flip("flip", ["seeds"], lambda ctx: [_proposal("f")])
    awaited = FnSuggestor("awaited", ["seeds"], lambda ctx: [_proposal("w")])
    engine = Engine()
    engine.register_all([flip, awaited])
    flip.synchronous = False  # type: ignore[misc]
    result = asyncio.run(engine.run([ProposedFact("seeds", "s", "go", 1.0, Provenance("seed"))]))
    assert result.converged
    assert flip.calls == 1
    assert {f.id for f in result.context.facts()} == {"s", "f", "w"}


def test_an_event_log_hands_each_event_straight_to_its_sink() -> None:
    """Nothing recorded (a served run's log): `emit` is the sink itself, no call of the
    log's own an event. Recorded: each event is kept, then told. Neither: dropped."""
    heard: list[BaseModel] = []
    event = FactPromoted(cycle=1, suggestor="s", key="k", id="i", gate="auto", logical_time=1)
    told = heard.append
    assert EventLog(told, record=False, clock=FakeClock()).emit is told
    both = EventLog(told, record=True, clock=FakeClock())
    both.emit(event)
    assert heard == [event]
    assert both.recorded() == (event,)
    kept = EventLog(None, record=True, clock=FakeClock())
    kept.emit(event)
    assert kept.recorded() == (event,)
    quiet = EventLog(None, record=False, clock=FakeClock())
    quiet.emit(event)
    assert not quiet.enabled
    assert quiet.recorded() == ()


@pytest.mark.parametrize("listened", [True, False])
def test_an_event_logs_timing_is_the_model_its_fields_make(listened: bool) -> None:
    """Built through `Timing`'s validator: the same model, validated the same way (a clock
    reading as an int is a float, as `Timing(at=3)` makes it)."""

    class IntClock(FakeClock):
        def monotonic(self) -> float:
            return 3

    heard: list[BaseModel] = []
    log = EventLog(heard.append if listened else None, record=False, clock=IntClock())
    timing = log.timing(0.5)
    assert type(timing) is Timing
    assert timing == Timing(at=3, duration_s=0.5)
    assert timing.model_dump_json() == '{"at":3.0,"duration_s":0.5}'
    assert log.timing().model_fields_set == Timing(at=3, duration_s=None).model_fields_set
