from __future__ import annotations

import asyncio

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.engine import (
    AgentEffect,
    Budget,
    ContextView,
    Engine,
    StopReason,
    SuggestorBase,
    UsageMeter,
    UsageTotals,
)
from converge_dsl.engine.testing import TickClock


def test_meter_counts_and_can_call_until_the_call_budget_is_reached() -> None:
    meter = UsageMeter(Budget(max_model_calls=2))
    assert meter.can_call()
    meter.record(input_tokens=10, output_tokens=5)
    assert meter.totals == UsageTotals(1, 10, 5)
    assert meter.totals.tokens == 15
    assert meter.can_call()
    meter.record()
    assert not meter.can_call()
    assert meter.exhausted(reached=True) is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert meter.exhausted(reached=False) is None
    meter.record()
    assert meter.exhausted(reached=False) is StopReason.MODEL_CALL_BUDGET_EXHAUSTED


def test_token_budget() -> None:
    meter = UsageMeter(Budget(max_tokens=100), UsageTotals(1, 60, 30))
    assert meter.can_call()
    meter.record(output_tokens=10)
    assert not meter.can_call()
    assert meter.exhausted(reached=True) is StopReason.TOKEN_BUDGET_EXHAUSTED


def test_unlimited_by_default_and_concurrency_must_be_positive() -> None:
    meter = UsageMeter(Budget())
    meter.record(model_calls=10_000, input_tokens=10**9)
    assert meter.can_call()
    with pytest.raises(ValueError, match="max_concurrency"):
        Budget(max_concurrency=0)


def test_the_deadline_refuses_calls_once_passed_and_says_why() -> None:
    clock = FakeClock()
    meter = UsageMeter(Budget(max_wall_s=5), clock=clock)
    assert meter.can_call()  # no run begun: no deadline
    meter.begin(clock.monotonic())
    clock.advance(4.9)
    assert meter.can_call()
    assert meter.refused is None
    clock.advance(0.1)
    assert not meter.can_call()
    assert meter.limit_reached() is StopReason.TIME_BUDGET_EXHAUSTED
    assert meter.refused is StopReason.TIME_BUDGET_EXHAUSTED
    meter.begin(clock.monotonic())  # a new run (a resume) starts afresh
    assert meter.refused is None
    assert meter.can_call()


def test_the_first_refusal_is_remembered() -> None:
    meter = UsageMeter(Budget(max_model_calls=1, max_tokens=10))
    meter.record(input_tokens=50)
    assert not meter.can_call()
    assert meter.refused is StopReason.MODEL_CALL_BUDGET_EXHAUSTED


def test_without_a_clock_there_is_no_deadline() -> None:
    meter = UsageMeter(Budget(max_wall_s=0))
    meter.begin(0.0)
    assert meter.can_call()


class _Greedy(SuggestorBase):
    """Calls a "model" until the meter refuses, as an agent does; proposes nothing."""

    dependencies = ()

    def __init__(self, meter: UsageMeter) -> None:
        self.name = "greedy"
        self.meter = meter
        self.calls = 0

    async def execute(self, ctx: ContextView) -> AgentEffect:
        while self.meter.can_call() and self.calls < 10_000:
            self.calls += 1
            self.meter.record(input_tokens=30, output_tokens=10)
        return AgentEffect.empty()


@pytest.mark.parametrize(
    ("budget", "reason"),
    [
        (Budget(max_model_calls=3), StopReason.MODEL_CALL_BUDGET_EXHAUSTED),
        (Budget(max_tokens=100), StopReason.TOKEN_BUDGET_EXHAUSTED),
        (Budget(max_wall_s=20), StopReason.TIME_BUDGET_EXHAUSTED),
    ],
)
def test_a_refused_call_stops_the_run_with_its_reason_not_converged(
    budget: Budget, reason: StopReason
) -> None:
    engine = Engine(budget=budget, clock=TickClock())
    greedy = _Greedy(engine.usage)
    engine.register(greedy)
    result = asyncio.run(engine.run())
    assert result.stop_reason is reason
    assert result.cycles == 1
    assert 0 < greedy.calls < 20
