from __future__ import annotations

import pytest

from converge_dsl.engine import Budget, StopReason, UsageMeter, UsageTotals


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
