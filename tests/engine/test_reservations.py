"""The usage meter's reservations and the engine's deadline that cancels suggestors in flight."""

from __future__ import annotations

import asyncio

from converge_dsl.clock import FakeClock
from converge_dsl.engine import (
    AgentEffect,
    Budget,
    ContextView,
    Engine,
    ProposedFact,
    Provenance,
    StopReason,
    SuggestorBase,
    UsageMeter,
)
from converge_dsl.engine.budget import MIN_ANSWER_TOKENS
from converge_dsl.models.port import Usage


def test_outstanding_reservations_count_against_the_call_budget() -> None:
    meter = UsageMeter(Budget(max_model_calls=2))
    first, second = meter.reserve(), meter.reserve()
    assert first is not None
    assert second is not None
    assert meter.reserve() is None
    assert meter.refused is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert not meter.can_call()
    assert meter.totals.model_calls == 0  # held, not yet made


def test_settle_counts_the_real_usage_and_release_gives_the_call_back() -> None:
    meter = UsageMeter(Budget(max_model_calls=2))
    held = meter.reserve(tokens_estimate=40)
    assert held is not None
    held.settle(Usage(3, 5))
    held.settle(Usage(100, 100))  # only the first settle or release counts
    held.release()
    assert (meter.totals.model_calls, meter.totals.tokens) == (1, 8)
    again = meter.reserve()
    assert again is not None
    again.release()
    assert meter.totals.model_calls == 1
    assert meter.can_call()
    assert meter.refused is None


def test_token_estimates_and_answer_caps_hold_against_the_token_budget() -> None:
    meter = UsageMeter(Budget(max_tokens=100))
    held = meter.reserve(tokens_estimate=60)
    assert held is not None
    assert held.max_tokens == 40  # the answer may take what the estimate leaves
    assert held.held_tokens == 100
    assert meter.reserve() is None
    assert meter.refused is StopReason.TOKEN_BUDGET_EXHAUSTED
    held.settle(Usage(10, 10))
    assert meter.can_call()


def test_an_estimate_that_leaves_no_useful_answer_cap_is_refused() -> None:
    meter = UsageMeter(Budget(max_tokens=100))
    assert meter.reserve(tokens_estimate=100 - MIN_ANSWER_TOKENS + 1) is None
    assert meter.refused is StopReason.TOKEN_BUDGET_EXHAUSTED
    small = UsageMeter(Budget(max_tokens=100))
    asked = small.reserve(tokens_estimate=95, answer_cap=5)  # it asks for less than the minimum
    assert asked is not None
    assert asked.max_tokens == 5


def test_a_cap_asked_for_is_kept_when_the_budget_leaves_more() -> None:
    meter = UsageMeter(Budget(max_tokens=1000))
    held = meter.reserve(tokens_estimate=10, answer_cap=50)
    assert held is not None
    assert held.max_tokens == 50
    second = meter.reserve(tokens_estimate=10, answer_cap=None)
    assert second is not None
    assert second.max_tokens == 1000 - 60 - 10
    unbounded = UsageMeter(Budget()).reserve(tokens_estimate=10, answer_cap=None)
    assert unbounded is not None
    assert unbounded.max_tokens is None


def test_settling_past_the_cap_reports_the_overshoot() -> None:
    meter = UsageMeter(Budget(max_tokens=1000))
    held = meter.reserve(tokens_estimate=10, answer_cap=50)
    assert held is not None
    assert held.settle(Usage(12, 80)) == 30
    within = meter.reserve(tokens_estimate=10, answer_cap=50)
    assert within is not None
    assert within.settle(Usage(12, 50)) == 0


def test_a_call_short_of_tokens_held_in_flight_waits_for_them() -> None:
    asyncio.run(_short_of_tokens_held_in_flight())


async def _short_of_tokens_held_in_flight() -> None:
    meter = UsageMeter(Budget(max_tokens=100))
    first = meter.reserve(tokens_estimate=10)
    assert first is not None
    assert first.max_tokens == 90
    waiting = asyncio.ensure_future(meter.reserve_call(tokens_estimate=10))
    await asyncio.sleep(0)
    assert not waiting.done()
    first.settle(Usage(10, 20))  # it used less than it held
    second = await waiting
    assert second is not None
    assert second.max_tokens == 100 - 30 - 10
    assert meter.refused is None
    second.settle(Usage(10, 60))
    assert await meter.reserve_call(tokens_estimate=10) is None  # spent, not held: refused
    assert meter.refused is StopReason.TOKEN_BUDGET_EXHAUSTED


def test_every_further_attempt_consumes_a_call() -> None:
    meter = UsageMeter(Budget(max_model_calls=2))
    held = meter.reserve()
    assert held is not None
    assert meter.allow_attempt()  # the retry is the second call
    assert not meter.allow_attempt()
    assert meter.refused is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    held.settle()
    assert meter.totals.model_calls == 2


def test_a_budget_refusal_from_a_model_is_the_time_budget_unless_the_gate_refused() -> None:
    meter = UsageMeter(Budget())
    assert meter.note_budget_refusal() is StopReason.TIME_BUDGET_EXHAUSTED
    gated = UsageMeter(Budget(max_model_calls=0))
    assert not gated.allow_attempt()
    assert gated.note_budget_refusal() is StopReason.MODEL_CALL_BUDGET_EXHAUSTED


def test_the_reservation_deadline_is_the_run_deadline() -> None:
    clock = FakeClock()
    meter = UsageMeter(Budget(max_wall_s=3), clock=clock)
    meter.begin(clock.monotonic())
    assert meter.deadline == 3.0
    assert meter.reserve() is not None
    clock.advance(3.0)
    assert meter.reserve() is None
    assert meter.refused is StopReason.TIME_BUDGET_EXHAUSTED


class _Slow(SuggestorBase):
    """Proposes one fact after waiting on an event that never comes (a call in flight)."""

    dependencies = ()

    def __init__(self, name: str, ready: asyncio.Event) -> None:
        self.name = name
        self.ready = ready
        self.cancelled = False

    async def execute(self, ctx: ContextView) -> AgentEffect:
        self.ready.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        fact = ProposedFact("hypotheses", "late", "too late", 0.9, Provenance("slow@test"))
        return AgentEffect((fact,))


class _Quick(SuggestorBase):
    dependencies = ()

    def __init__(self) -> None:
        self.name = "quick"

    async def execute(self, ctx: ContextView) -> AgentEffect:
        fact = ProposedFact("hypotheses", "quick", "in time", 0.9, Provenance("quick@test"))
        return AgentEffect((fact,))


def test_the_deadline_cancels_the_suggestors_in_flight_and_keeps_nothing_of_the_cycle() -> None:
    clock = FakeClock()
    events: list[object] = []
    engine = Engine(budget=Budget(max_wall_s=3), clock=clock, events=events.append)
    ready = asyncio.Event()
    slow = _Slow("slow", ready)
    engine.register_all([_Quick(), slow])

    async def scenario() -> tuple[StopReason, float, int]:
        run = asyncio.ensure_future(engine.run())
        await ready.wait()
        clock.advance(3.0)
        result = await asyncio.wait_for(run, 0.5)  # the watcher polls the clock
        return result.stop_reason, clock.monotonic(), len(result.context.get("hypotheses"))

    reason, stopped_at, kept = asyncio.run(scenario())
    assert reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert stopped_at == 3.0
    assert slow.cancelled
    assert kept == 0
    failed = [e for e in events if getattr(e, "type", None) == "suggestor_failed"]
    assert [(e.suggestor, e.cycle) for e in failed] == [("slow", 1)]  # type: ignore[attr-defined]
    assert "deadline" in failed[0].error  # type: ignore[attr-defined]


def test_a_cycle_that_ends_before_the_deadline_is_not_cancelled() -> None:
    engine = Engine(budget=Budget(max_wall_s=3), clock=FakeClock())
    engine.register(_Quick())
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.CONVERGED
    assert [f.id for f in result.context.get("hypotheses")] == ["quick"]
