"""The rules of the engine loop (DESIGN §1.1), one test (or more) each."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.engine import (
    AgentEffect,
    Budget,
    ContextView,
    Engine,
    FactPromoted,
    Invariant,
    PromotionPolicy,
    ProposedFact,
    Provenance,
    SeedSuggestor,
    StopReason,
    SuggestorBase,
)
from converge_dsl.engine.testing import FnSuggestor, StepClock
from converge_dsl.errors import ConvergeError, KernelError, RunError, TemplateRunError


def P(
    key: str, fid: str, content: object = "c", confidence: float = 1.0, source: str = "s"
) -> ProposedFact:
    return ProposedFact(key, fid, content, confidence, Provenance(source))  # type: ignore[arg-type]


def emit(*proposals: ProposedFact):  # type: ignore[no-untyped-def]
    return lambda ctx: proposals


def run(engine: Engine, seeds: Iterable[ProposedFact] = ()):  # type: ignore[no-untyped-def]
    return asyncio.run(engine.run(tuple(seeds)))


def test_seeds_first_then_dependents_to_a_fixed_point() -> None:
    engine = Engine()
    engine.register(
        FnSuggestor(
            "h", ["seeds"], lambda ctx: [P("hypotheses", f"h-{f.id}") for f in ctx.get("seeds")]
        )
    )
    engine.register(FnSuggestor("s", ["hypotheses"], lambda ctx: [P("strategies", "all")]))
    result = run(engine, [P("seeds", "a"), P("seeds", "b")])
    assert result.stop_reason is StopReason.CONVERGED
    assert [(f.key, f.id, f.promotion.cycle, f.promotion.logical_time) for f in result.context] == [
        ("seeds", "a", 0, 1),
        ("seeds", "b", 0, 2),
        ("hypotheses", "h-a", 1, 3),
        ("hypotheses", "h-b", 1, 4),
        ("strategies", "all", 2, 5),
    ]
    assert result.context.fact("seeds", "a").promotion.gate == "seed"  # type: ignore[union-attr]
    assert result.cycles == 3  # the third cycle finds no candidate


def test_seed_without_provenance_gets_the_seed_provenance() -> None:
    result = run(Engine(), [ProposedFact("seeds", "a", "x")])
    assert result.context.get("seeds")[0].provenance == Provenance("seed")


def test_merge_follows_registration_order_not_finishing_order() -> None:
    clock = StepClock()
    engine = Engine(clock=clock)
    for name, delay in [("slow", 5), ("mid", 2), ("fast", 0)]:
        engine.register(FnSuggestor(name, [], emit(P("signals", name)), delay=delay, clock=clock))
    result = run(engine)
    assert [f.id for f in result.context.get("signals")] == ["slow", "mid", "fast"]


def test_candidates_come_from_the_index_of_dirty_keys() -> None:
    asked: list[str] = []

    def watch(name: str):  # type: ignore[no-untyped-def]
        def accepts(ctx: ContextView) -> bool:
            asked.append(f"{name}@{ctx.cycle}")
            return False

        return accepts

    engine = Engine()
    engine.register(SeedSuggestor("seed", [("a", "x")]))
    engine.register(FnSuggestor("on-seeds", ["seeds"], emit(), accepts=watch("on-seeds")))
    engine.register(FnSuggestor("on-votes", ["votes"], emit(), accepts=watch("on-votes")))
    result = run(engine)
    assert result.stop_reason is StopReason.CONVERGED
    assert asked == ["on-seeds@2"]  # never asked while seeds were clean; votes never dirty


def test_accepts_filters_candidates() -> None:
    never = FnSuggestor("never", [], emit(P("signals", "x")), accepts=lambda ctx: False)
    engine = Engine()
    engine.register(never)
    result = run(engine)
    assert never.calls == 0
    assert result.stop_reason is StopReason.CONVERGED
    assert result.cycles == 1


def test_execution_is_concurrent_and_bounded_by_max_concurrency() -> None:
    running = peak = 0

    class Probe(SuggestorBase):
        def __init__(self, name: str) -> None:
            self.name = name

        def accepts(self, ctx: ContextView) -> bool:
            return ctx.cycle == 1

        async def execute(self, ctx: ContextView) -> AgentEffect:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            for _ in range(3):
                await asyncio.sleep(0)
            running -= 1
            return AgentEffect.empty()

    for limit, expected in [(3, 3), (32, 8)]:
        peak = 0
        engine = Engine(budget=Budget(max_concurrency=limit))
        for i in range(8):
            engine.register(Probe(f"p{i}"))
        run(engine)
        assert peak == expected


def test_a_refused_id_is_rejected_and_not_carried_on_as_it_is() -> None:
    """A proposal (or seed) whose id holds a NUL byte, a control or hidden character, or a
    `..` segment is the gate's rejection with the reason; the rejection's fact and event
    hold the id escaped. Before, such ids became facts as they were."""
    engine = Engine()
    engine.register(
        FnSuggestor(
            "s",
            [],
            emit(
                P("hypotheses", "a\x00b", "fine"),
                P("hypotheses", "../up", "fine"),
                P("hypotheses", "line\nbreak", "fine"),
                P("hypotheses", "good/./id:1", "fine"),
            ),
        )
    )
    result = run(engine, [P("hypotheses", "seed\u202e", "fine")])
    assert [f.id for f in result.context.get("hypotheses")] == ["good/./id:1"]
    reasons = {f.id: f.data["reason"] for f in result.context.get("diagnostic")}
    assert reasons == {
        "validation:rejected:a\\x00b": "id 'a\\x00b' holds a NUL byte",
        "validation:rejected:%2E%2E/up": "id '../up' has '..' as a path segment (a folder up)",
        "validation:rejected:line\\x0abreak": "id 'line\\x0abreak' holds a control character "
        "(U+000A)",
        "validation:rejected:seed\\u202e": "id 'seed\\u202e' holds a hidden character (U+202E)",
    }
    rejected = result.context.fact("diagnostic", "validation:rejected:a\\x00b")
    assert rejected is not None
    assert rejected.data["proposal"] == "a\\x00b"


def test_two_refused_ids_keep_a_rejection_each() -> None:
    # before, both were shown '%2E%2E/a\x00' and the second rejection's fact was dropped
    engine = Engine()
    engine.register(
        FnSuggestor(
            "s", [], emit(P("hypotheses", "../a\x00", "x"), P("hypotheses", "%2E%2E/a\x00", "x"))
        )
    )
    result = run(engine, [])
    reasons = {f.id: f.data["reason"] for f in result.context.get("diagnostic")}
    assert reasons == {
        "validation:rejected:%2E%2E/a\\x00": "id '../a\\x00' holds a NUL byte",
        "validation:rejected:%252E%252E/a\\x00": "id '%2E%2E/a\\x00' holds a NUL byte",
    }


def test_rejections_become_diagnostic_facts_with_the_reason() -> None:
    engine = Engine(policy=PromotionPolicy(forbidden_terms=("Guaranteed",)))
    engine.register(
        FnSuggestor(
            "s",
            [],
            emit(
                P("hypotheses", "low", "fine", 0.1),
                P("hypotheses", "blank", "  "),
                P("hypotheses", "bad", "100% guaranteed"),
                P("hypotheses", "good", "fine", 0.5),
            ),
        )
    )
    result = run(engine)
    assert [f.id for f in result.context.get("hypotheses")] == ["good"]
    reasons = {f.id: f.data["reason"] for f in result.context.get("diagnostic")}
    assert reasons == {
        "validation:rejected:low": "confidence 0.1 is below min_confidence 0.5",
        "validation:rejected:blank": "blank content",
        "validation:rejected:bad": "content contains forbidden term 'Guaranteed'",
    }
    diagnostic = result.context.fact("diagnostic", "validation:rejected:low")
    assert diagnostic is not None
    assert diagnostic.data["suggestor"] == "s"
    assert diagnostic.data == {
        "key": "hypotheses",
        "proposal": "low",
        "suggestor": "s",
        "reason": "confidence 0.1 is below min_confidence 0.5",
    }
    assert diagnostic.content == (
        "hypotheses/low from s rejected: confidence 0.1 is below min_confidence 0.5"
    )
    assert diagnostic.promotion.gate == "engine"
    assert result.stop_reason is StopReason.CONVERGED


def test_same_id_same_content_is_a_no_op() -> None:
    engine = Engine()
    engine.register(FnSuggestor("a", [], emit(P("signals", "x", {"v": [1, 2]}))))
    engine.register(FnSuggestor("b", [], emit(P("signals", "x", {"v": [1, 2]}))))
    result = run(engine)
    assert result.stop_reason is StopReason.CONVERGED
    assert len(result.context) == 1
    assert result.context.get("signals")[0].provenance.source == "s"


def test_same_id_different_content_is_a_conflict_naming_both_contents() -> None:
    engine = Engine()
    engine.register(FnSuggestor("a", [], emit(P("signals", "x", "first"))))
    engine.register(FnSuggestor("b", [], emit(P("signals", "x", "second"))))
    result = run(engine)
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(result.error, KernelError)
    assert result.error.suggestor == "b"
    message = str(result.error)
    assert "'first'" in message
    assert "'second'" in message
    assert "signals/x" in message


def test_empty_provenance_is_a_kernel_error_naming_the_suggestor() -> None:
    engine = Engine()
    engine.register(FnSuggestor("anon", [], emit(ProposedFact("signals", "x", "c"))))
    result = run(engine)
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(result.error, KernelError)
    assert result.error.suggestor == "anon"
    assert result.error.cycle == 1
    assert "empty provenance" in str(result.error)


def test_without_require_provenance_the_suggestor_provenance_is_stamped() -> None:
    engine = Engine(policy=PromotionPolicy(require_provenance=False))
    engine.register(FnSuggestor("anon", [], emit(ProposedFact("signals", "x", "c"))))
    result = run(engine)
    assert result.context.get("signals")[0].provenance == Provenance("anon")


def test_unknown_keys_are_refused() -> None:
    engine = Engine(declared_keys=["risks"])
    engine.register(FnSuggestor("ok", ["risks"], emit()))
    with pytest.raises(ConvergeError, match="unknown key 'risk'") as caught:
        engine.register(FnSuggestor("bad", ["risk"], emit()))
    assert caught.value.hint == "did you mean 'risks'?"
    engine.register(FnSuggestor("writer", [], emit(P("risk", "x"))))
    result = run(engine)
    assert isinstance(result.error, KernelError)
    assert "unknown key 'risk'" in str(result.error)


def test_duplicate_names_are_refused() -> None:
    engine = Engine()
    engine.register(FnSuggestor("x", [], emit()))
    with pytest.raises(ConvergeError, match="registered twice"):
        engine.register(FnSuggestor("x", ["seeds"], emit()))


def test_a_raising_suggestor_stops_the_run_naming_it_and_the_cycle() -> None:
    engine = Engine()
    engine.register(SeedSuggestor("seed", [("a", "x")]))
    engine.register(FnSuggestor("boom", ["seeds"], emit(), fail=ValueError("bad value")))
    result = run(engine)
    assert result.stop_reason is StopReason.ERROR
    assert isinstance(result.error, RunError)
    assert (result.error.suggestor, result.error.cycle) == ("boom", 2)
    assert str(result.error) == "suggestor raised ValueError: bad value (suggestor 'boom', cycle 2)"


def test_a_converge_error_with_a_span_keeps_its_message_and_span() -> None:
    span = SourceSpan("p.yaml", 7, 3, 7, 9)
    engine = Engine()
    engine.register(
        FnSuggestor("tpl", [], emit(), fail=TemplateRunError("'x' is undefined", span=span))
    )
    result = run(engine)
    assert isinstance(result.error, TemplateRunError)
    assert result.error.span == span
    assert str(result.error) == "p.yaml:7:3: 'x' is undefined (suggestor 'tpl', cycle 1)"


def test_on_error_diagnose_records_a_diagnostic_and_goes_on() -> None:
    engine = Engine(on_error="diagnose")
    engine.register(
        FnSuggestor("boom", [], emit(), fail=RuntimeError("nope"), accepts=lambda c: c.cycle == 1)
    )
    engine.register(FnSuggestor("ok", [], emit(P("signals", "fine"))))
    result = run(engine)
    assert result.stop_reason is StopReason.CONVERGED
    assert result.error is None
    fact = result.context.fact("diagnostic", "error:boom:1")
    assert fact is not None
    assert fact.data["error"] == "suggestor raised RuntimeError: nope"
    assert fact.content == "suggestor 'boom' failed in cycle 1: suggestor raised RuntimeError: nope"
    assert result.context.fact("signals", "fine") is not None
    assert any(getattr(e, "type", "") == "suggestor_failed" for e in result.events)


def test_on_error_diagnose_keeps_a_model_errors_code_in_the_diagnostic() -> None:
    # The fact is what a pipeline reads to tell a rate limit from a timeout: it read
    # `slow down`, its E_RATE_LIMITED gone, once codes left error messages.
    from converge_dsl.models import ModelError, ModelErrorCode

    engine = Engine(on_error="diagnose")
    failure = ModelError(ModelErrorCode.RATE_LIMITED, "slow down")
    engine.register(FnSuggestor("ask", [], emit(), fail=failure, accepts=lambda c: c.cycle == 1))
    result = run(engine)
    fact = result.context.fact("diagnostic", "error:ask:1")
    assert fact is not None
    assert fact.data["error"] == "E_RATE_LIMITED: slow down"
    assert fact.content == "suggestor 'ask' failed in cycle 1: E_RATE_LIMITED: slow down"


def test_execute_must_return_an_agent_effect() -> None:
    class Wrong(SuggestorBase):
        name = "wrong"

        async def execute(self, ctx: ContextView) -> AgentEffect:
            return [P("signals", "x")]  # type: ignore[return-value]

    engine = Engine()
    engine.register(Wrong())
    result = run(engine)
    assert isinstance(result.error, KernelError)
    assert "not an AgentEffect" in str(result.error)


def _inv(name: str, cls: str, critical: bool, bad_when: int) -> Invariant:
    return Invariant(
        name,
        cls,
        critical,
        lambda ctx: f"{ctx.count('signals')} signals" if ctx.count("signals") >= bad_when else None,  # type: ignore[arg-type]
    )


def _counting_engine(*invariants: Invariant) -> Engine:
    engine = Engine(invariants=invariants)
    engine.register(
        FnSuggestor(
            "count", [], lambda ctx: [P("signals", str(ctx.cycle))], accepts=lambda c: c.cycle <= 3
        )
    )
    return engine


def test_structural_invariant_checked_after_each_merge() -> None:
    result = run(_counting_engine(_inv("max-one", "structural", True, 2)))
    assert result.stop_reason is StopReason.INVARIANT_VIOLATED
    assert result.cycles == 2
    assert "structural invariant 'max-one' violated: 2 signals" in str(result.error)


def test_semantic_invariant_checked_at_the_end_of_each_cycle() -> None:
    result = run(_counting_engine(_inv("max-two", "semantic", True, 3)))
    assert result.stop_reason is StopReason.INVARIANT_VIOLATED
    assert result.cycles == 3


def test_acceptance_invariant_checked_only_on_convergence() -> None:
    engine = _counting_engine(_inv("at-most-two", "acceptance", True, 3))
    result = run(engine)
    assert result.stop_reason is StopReason.INVARIANT_VIOLATED
    assert result.context.count("signals") == 3
    checked = [e for e in result.events if getattr(e, "type", "") == "invariant_checked"]
    assert len(checked) == 1


def test_advisory_invariant_becomes_a_diagnostic_and_the_run_goes_on() -> None:
    result = run(_counting_engine(_inv("soft", "semantic", False, 2)))
    assert result.stop_reason is StopReason.CONVERGED
    fact = result.context.fact("diagnostic", "invariant:soft")
    assert fact is not None
    assert fact.data["message"] == "2 signals"
    assert fact.content == "semantic invariant 'soft' does not hold: 2 signals"
    failing = [
        e for e in result.events if getattr(e, "type", "") == "invariant_checked" and not e.holds
    ]  # type: ignore[attr-defined]
    assert len(failing) == 2


def test_an_invariant_that_raises_stops_with_an_error() -> None:
    def broken(ctx: ContextView) -> str | None:
        raise KeyError("x")

    result = run(_counting_engine(Invariant("broken", "semantic", True, broken)))
    assert result.stop_reason is StopReason.ERROR
    assert "invariant 'broken' raised KeyError" in str(result.error)


def test_cycle_budget() -> None:
    engine = Engine(budget=Budget(max_cycles=4))
    engine.register(FnSuggestor("forever", [], lambda ctx: [P("signals", str(ctx.cycle))]))
    result = run(engine)
    assert result.stop_reason is StopReason.CYCLE_BUDGET_EXHAUSTED
    assert result.cycles == 4
    assert result.context.count("signals") == 4


def test_fact_budget_never_lets_the_context_grow_past_it() -> None:
    engine = Engine(budget=Budget(max_facts=5))
    engine.register(
        FnSuggestor("many", [], lambda ctx: [P("signals", f"{ctx.cycle}-{i}") for i in range(3)])
    )
    result = run(engine)
    assert result.stop_reason is StopReason.FACT_BUDGET_EXHAUSTED
    assert len(result.context) == 5


class Caller(SuggestorBase):
    """Makes one model call a cycle of 10 tokens."""

    def __init__(self, engine: Engine) -> None:
        self.name = "caller"
        self.engine = engine

    async def execute(self, ctx: ContextView) -> AgentEffect:
        if self.engine.usage.can_call():
            self.engine.usage.record(input_tokens=6, output_tokens=4)
        return AgentEffect((P("signals", str(ctx.cycle)),))


@pytest.mark.parametrize(
    ("budget", "reason", "calls"),
    [
        (Budget(max_model_calls=3), StopReason.MODEL_CALL_BUDGET_EXHAUSTED, 3),
        (Budget(max_tokens=25), StopReason.TOKEN_BUDGET_EXHAUSTED, 3),
    ],
)
def test_usage_budgets(budget: Budget, reason: StopReason, calls: int) -> None:
    engine = Engine(budget=budget)
    engine.register(Caller(engine))
    result = run(engine)
    assert result.stop_reason is reason
    assert result.usage.model_calls == calls
    assert engine.usage.totals == result.usage


def test_time_budget_through_the_injected_clock() -> None:
    clock = FakeClock()
    engine = Engine(budget=Budget(max_wall_s=10), clock=clock)
    engine.register(
        FnSuggestor("slow", [], lambda ctx: [P("signals", str(ctx.cycle))], delay=4, clock=clock)
    )
    result = run(engine)
    assert result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert result.cycles == 3
    assert clock.sleeps == [4, 4, 4]


def test_cancel_stops_a_running_cycle() -> None:
    engine = Engine()

    async def main():  # type: ignore[no-untyped-def]
        started = asyncio.Event()

        class Hang(SuggestorBase):
            def __init__(self, name: str) -> None:
                self.name = name

            async def execute(self, ctx: ContextView) -> AgentEffect:
                started.set()
                await asyncio.sleep(3600)
                return AgentEffect.empty()

        engine.register(Hang("h1"))
        engine.register(Hang("h2"))
        task = asyncio.create_task(engine.run())
        await started.wait()
        engine.cancel()
        return await task

    result = asyncio.run(main())
    assert result.stop_reason is StopReason.CANCELLED


def test_events_go_to_the_sink_and_into_the_result() -> None:
    seen: list[object] = []
    engine = Engine(events=seen.append)
    engine.register(SeedSuggestor("seed", [("a", "x")]))
    result = run(engine)
    assert tuple(seen) == result.events
    types = [e.type for e in result.events]  # type: ignore[attr-defined]
    assert types == [
        "run_started",
        "cycle_started",
        "suggestor_started",
        "suggestor_finished",
        "fact_promoted",
        "cycle_finished",
        "run_finished",
    ]
    promoted = [e for e in result.events if isinstance(e, FactPromoted)]
    assert promoted[0].logical_time == 1
    finished = result.events[3]
    assert finished.timing is not None  # type: ignore[attr-defined]
    assert finished.timing.duration_s is not None  # type: ignore[attr-defined]


def test_record_events_off_keeps_no_events() -> None:
    engine = Engine(record_events=False)
    engine.register(SeedSuggestor("seed", [("a", "x")]))
    assert run(engine).events == ()


def test_an_engine_runs_one_run_at_a_time() -> None:
    engine = Engine()

    async def main() -> None:
        class Wait(SuggestorBase):
            name = "wait"

            async def execute(self, ctx: ContextView) -> AgentEffect:
                await asyncio.sleep(0.01)
                return AgentEffect.empty()

        engine.register(Wait())
        first = asyncio.create_task(engine.run())
        await asyncio.sleep(0)
        with pytest.raises(ConvergeError, match="already running"):
            await engine.run()
        await first

    asyncio.run(main())


def test_cancel_interrupts_a_single_running_suggestor() -> None:
    engine = Engine()

    async def main():  # type: ignore[no-untyped-def]
        started = asyncio.Event()

        class Hang(SuggestorBase):
            name = "hang"

            async def execute(self, ctx: ContextView) -> AgentEffect:
                started.set()
                await asyncio.sleep(3600)
                return AgentEffect.empty()

        engine.register(Hang())
        task = asyncio.create_task(engine.run())
        await started.wait()
        engine.cancel()
        return await task

    assert asyncio.run(main()).stop_reason is StopReason.CANCELLED
