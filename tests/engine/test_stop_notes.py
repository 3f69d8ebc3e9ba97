"""Every stop but `converged` leaves a `StopNote` (code, message, who); budgets name spenders."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from converge_dsl import codes
from converge_dsl.clock import FakeClock
from converge_dsl.diagnostics import Severity, SourceSpan
from converge_dsl.engine import (
    AgentEffect,
    Budget,
    ContextView,
    Engine,
    Invariant,
    PromotionPolicy,
    ProposedFact,
    Provenance,
    RunResult,
    StopReason,
    SuggestorBase,
    UsageMeter,
)
from converge_dsl.engine._explain import ranked
from converge_dsl.engine.budget import SPENDER
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.errors import ModelFailure, TemplateRunError


def P(key: str, fid: str, content: str = "c") -> ProposedFact:
    return ProposedFact(key, fid, content, 1.0, Provenance("s"))


def run(engine: Engine, *seeds: ProposedFact) -> RunResult:
    return asyncio.run(engine.run(seeds))


def only_note(result: RunResult):  # type: ignore[no-untyped-def]
    (note,) = result.notes
    return note


@dataclass(frozen=True)
class _Usage:
    input_tokens: int
    output_tokens: int


class Caller(SuggestorBase):
    """Makes `calls` metered model calls per execution, each of `tokens` tokens, every cycle."""

    dependencies = ()

    def __init__(self, name: str, meter: UsageMeter, calls: int = 1, tokens: int = 10) -> None:
        self.name = name
        self.meter = meter
        self.calls = calls
        self.tokens = tokens

    async def execute(self, ctx: ContextView) -> AgentEffect:
        for _ in range(self.calls):
            half = self.tokens // 2  # its input estimate, and its answer's cap
            reservation = self.meter.reserve(half, answer_cap=self.tokens - half)
            if reservation is None:
                return AgentEffect.empty()
            await asyncio.sleep(0)  # others run meanwhile: attribution is per task
            reservation.settle(_Usage(self.tokens // 2, self.tokens - self.tokens // 2))
        fact = P("signals", f"{self.name}-{ctx.cycle}")
        return AgentEffect((fact,))


def metered_engine(budget: Budget, spenders: dict[str, int]) -> Engine:
    meter = UsageMeter(budget)
    engine = Engine(budget=budget, usage=meter)
    engine.register_all(Caller(name, meter, calls) for name, calls in spenders.items())
    return engine


def test_a_converged_run_has_no_notes() -> None:
    engine = Engine()
    engine.register(FnSuggestor("a", ["seeds"], lambda ctx: [P("hypotheses", "h")]))
    result = run(engine, P("seeds", "x"))
    assert result.stop_reason is StopReason.CONVERGED
    assert result.notes == ()


def test_model_call_budget_names_who_made_the_calls_most_first() -> None:
    engine = metered_engine(Budget(max_model_calls=20), {"classify": 1, "summarise": 3})
    note = only_note(run(engine))
    assert note.code == codes.STOP_MODEL_CALL_BUDGET
    assert note.message.startswith("max_model_calls 20 reached: 'summarise' made 15 calls, ")
    assert "'classify' 5" in note.message
    assert (note.suggestor, note.setting) == ("summarise", "max_model_calls")


def test_a_refused_call_is_named() -> None:
    engine = metered_engine(Budget(max_model_calls=4), {"classify": 1, "summarise": 2})
    result = run(engine)
    assert result.stop_reason is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert only_note(result).message == (
        "max_model_calls 4 reached: 'classify' made 2 calls, 'summarise' 2; "
        "'summarise' was refused a call"
    )


def test_token_budget_names_who_spent_the_tokens() -> None:
    engine = metered_engine(Budget(max_tokens=55), {"a": 1, "b": 2})
    note = only_note(run(engine))
    assert note.code == codes.STOP_TOKEN_BUDGET
    # The budget holds: the call that would pass 55 is refused, not made.
    assert "50 tokens used; 'b' used 30 tokens, 'a' 20" in note.message
    assert "'b' was refused a call with 5 tokens left" in note.message
    assert note.suggestor == "b"


def test_cycle_budget_names_who_kept_running() -> None:
    engine = Engine(budget=Budget(max_cycles=4))
    engine.register(FnSuggestor("loop", [], lambda ctx: [P("signals", f"s{ctx.cycle}")]))
    engine.register(FnSuggestor("echo", ["signals"], lambda ctx: [P("votes", f"v{ctx.cycle}")]))
    note = only_note(run(engine))
    assert note.code == codes.STOP_CYCLE_BUDGET
    assert note.message == "max_cycles 4 reached: 'loop' ran in 4 cycles, 'echo' 3"
    assert (note.suggestor, note.cycle) == ("loop", 4)


def test_fact_budget_names_who_promoted_and_who_proposed_one_more() -> None:
    engine = Engine(budget=Budget(max_facts=3))
    engine.register(FnSuggestor("many", ["seeds"], lambda ctx: [P("hypotheses", "a")]))
    engine.register(
        FnSuggestor("more", ["hypotheses"], lambda ctx: [P("strategies", "b"), P("votes", "c")])
    )
    note = only_note(run(engine, P("seeds", "x")))
    assert note.code == codes.STOP_FACT_BUDGET
    assert "seeds 1" in note.message  # not a suggestor: not quoted
    assert "'more' proposed one more" in note.message
    assert note.suggestor == "more"


def test_time_budget_names_the_suggestors_cancelled_in_flight() -> None:
    clock = FakeClock()
    engine = Engine(budget=Budget(max_wall_s=2), clock=clock)
    started = asyncio.Event()

    class Hang(SuggestorBase):
        name = "hang"
        dependencies = ()

        async def execute(self, ctx: ContextView) -> AgentEffect:
            started.set()
            await asyncio.Event().wait()
            return AgentEffect.empty()

    engine.register(Hang())

    async def scenario() -> RunResult:
        task = asyncio.ensure_future(engine.run())
        await started.wait()
        clock.advance(5)
        return await asyncio.wait_for(task, 2)

    note = only_note(asyncio.run(scenario()))
    assert note.code == codes.STOP_TIME_BUDGET
    assert note.message == "max_wall_s 2 s reached in cycle 1, cancelling 'hang' in flight"
    assert note.suggestor == "hang"


def test_time_budget_at_a_cycle_boundary_names_where_time_went() -> None:
    clock = FakeClock()

    def slow(ctx: ContextView) -> list[ProposedFact]:
        clock.advance(3)
        return [P("signals", f"s{ctx.cycle}")]

    engine = Engine(budget=Budget(max_wall_s=5), clock=clock)
    engine.register(FnSuggestor("slow", [], slow, accepts=lambda ctx: True))
    note = only_note(run(engine))
    assert note.code == codes.STOP_TIME_BUDGET
    assert note.message.startswith("max_wall_s 5 s reached after cycle 2")
    assert note.suggestor == "slow"


def test_critical_invariant_names_the_invariant_and_the_merging_suggestor() -> None:
    engine = Engine(
        invariants=[
            Invariant("one", "structural", True, lambda c: "two" if c.count("signals") else None)
        ]
    )
    engine.register(FnSuggestor("noisy", [], lambda ctx: [P("signals", "x")]))
    note = only_note(run(engine))
    assert (note.code, note.invariant, note.suggestor) == (
        codes.STOP_INVARIANT_VIOLATED,
        "one",
        "noisy",
    )


def test_an_invariant_that_raises_is_named() -> None:
    def broken(ctx: ContextView) -> str | None:
        raise ValueError("boom")

    engine = Engine(invariants=[Invariant("fragile", "semantic", True, broken)])
    engine.register(FnSuggestor("a", [], lambda ctx: [P("signals", "x")]))
    note = only_note(run(engine))
    assert (note.code, note.invariant) == (codes.STOP_INVARIANT_FAILED, "fragile")
    assert note.message.startswith("invariant 'fragile' could not be checked: ")


def test_a_pause_is_a_warning_per_suggestor() -> None:
    engine = Engine(policy=PromotionPolicy(gated_keys=frozenset({"strategies"})))
    engine.register(
        FnSuggestor("plan", [], lambda ctx: [P("strategies", "s1"), P("strategies", "s2")])
    )
    engine.register(FnSuggestor("other", [], lambda ctx: [P("strategies", "s3")]))
    result = run(engine)
    assert result.stop_reason is StopReason.HITL_PAUSE
    assert [(n.code, n.severity, n.suggestor) for n in result.notes] == [
        (codes.STOP_HITL_PAUSE, Severity.WARNING, "plan"),
        (codes.STOP_HITL_PAUSE, Severity.WARNING, "other"),
    ]
    assert "(s1, s2; gated:" in result.notes[0].message


def test_cancel_names_the_suggestors_in_flight() -> None:
    engine = Engine()
    started = asyncio.Event()

    class Hang(SuggestorBase):
        dependencies = ()

        def __init__(self, name: str) -> None:
            self.name = name

        async def execute(self, ctx: ContextView) -> AgentEffect:
            started.set()
            await asyncio.sleep(3600)
            return AgentEffect.empty()

    engine.register_all([Hang("h1"), Hang("h2")])

    async def main() -> RunResult:
        task = asyncio.create_task(engine.run())
        await started.wait()
        engine.cancel()
        return await task

    note = only_note(asyncio.run(main()))
    assert note.code == codes.STOP_CANCELLED
    assert note.message == "the run was cancelled in cycle 1; cancelled in flight: 'h1', 'h2'"
    assert note.suggestor == "h1"


def _failing(error: BaseException) -> Engine:
    engine = Engine()
    engine.register(FnSuggestor("bad", [], lambda ctx: [], fail=error))  # type: ignore[arg-type]
    return engine


SPAN = SourceSpan("p.yaml", 9, 3, 9, 20)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (RuntimeError("nope"), codes.STOP_SUGGESTOR_FAILED),
        (ModelFailure("E_PROVIDER: down"), codes.STOP_MODEL_FAILED),
        (TemplateRunError("template failed", span=SPAN), codes.RUN_ERROR),
    ],
)
def test_a_failing_suggestor_is_classified(error: Exception, code: str) -> None:
    note = only_note(run(_failing(error)))
    assert (note.code, note.suggestor, note.cycle) == (code, "bad", 1)
    assert note.message.endswith("(suggestor 'bad', cycle 1)")
    assert note.span == (SPAN if code == codes.RUN_ERROR else None)


def test_a_conflict_and_a_kernel_rule_have_their_own_codes() -> None:
    engine = Engine()
    engine.register(FnSuggestor("one", [], lambda ctx: [P("signals", "x", "a")]))
    engine.register(FnSuggestor("two", [], lambda ctx: [P("signals", "x", "b")]))
    assert (only_note(run(engine)).code, only_note(run(engine)).suggestor) == (
        codes.STOP_CONFLICT,
        "two",
    )
    engine = Engine()
    engine.register(FnSuggestor("lost", [], lambda ctx: [P("nowhere", "x")]))
    note = only_note(run(engine))
    assert (note.code, note.suggestor) == (codes.STOP_KERNEL_RULE, "lost")


def test_every_stop_reason_but_converged_has_a_note() -> None:
    """The engine explains every reason it can stop with (a table kept with the enum)."""
    from converge_dsl.engine import _explain

    explained = set(_explain._BUDGET) | {
        StopReason.HITL_PAUSE,
        StopReason.CANCELLED,
        StopReason.ERROR,
        StopReason.INVARIANT_VIOLATED,
    }
    assert explained == set(StopReason) - {StopReason.CONVERGED}


def test_the_meter_attributes_usage_to_the_task_that_spent_it() -> None:
    meter = UsageMeter(Budget())

    async def spend(name: str, calls: int) -> None:
        SPENDER.set(name)
        for _ in range(calls):
            reservation = meter.reserve(4)
            await asyncio.sleep(0)
            assert reservation is not None
            reservation.settle(_Usage(1, 2))
        assert meter.allow_attempt()  # a retry counts for the same suggestor

    async def main() -> None:
        await asyncio.gather(spend("a", 3), spend("b", 1))

    asyncio.run(main())
    spent = meter.spent_by()
    assert (spent["a"].model_calls, spent["a"].tokens) == (4, 9)
    assert (spent["b"].model_calls, spent["b"].tokens) == (2, 3)
    assert meter.totals.model_calls == 6
    meter.record(model_calls=1)  # outside any suggestor: in the totals only
    assert meter.totals.model_calls == 7
    assert sum(u.model_calls for u in meter.spent_by().values()) == 6


def test_a_resumed_run_counts_what_earlier_runs_spent() -> None:
    budget = Budget(max_model_calls=6)
    engine = metered_engine(budget, {"again": 1})
    stopped = run(engine)  # spends all 6
    engine = metered_engine(Budget(max_model_calls=8), {"again": 1})
    result = asyncio.run(engine.run(resume_from=stopped.state))
    message = only_note(result).message
    assert message == "max_model_calls 8 reached: 'again' made 2 calls, 6 before the resume"


def test_ranked_names_the_first_few_and_counts_the_rest() -> None:
    counts = {f"s{i}": float(10 - i) for i in range(8)} | {"idle": 0.0}
    assert ranked(counts, "call", "made") == (
        "'s0' made 10 calls, 's1' 9, 's2' 8, 's3' 7, 's4' 6, 3 more"
    )
    assert ranked({}, "call", "made") == "no suggestor made any"
