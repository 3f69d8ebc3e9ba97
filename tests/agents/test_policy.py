from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.agents._policy import (
    CompactionPolicy,
    Exceeded,
    Segment,
    apply_reduction,
    default_token_counter,
    next_compaction,
    total_tokens,
)
from converge_dsl.agents._summary_budget import SummaryBudget


def history(*turn_tokens: int, preamble: int = 10) -> tuple[Segment, ...]:
    segs = [Segment("preamble", -1, -1, preamble)]
    segs += [Segment("turn", t, t, n) for t, n in enumerate(turn_tokens)]
    return tuple(segs)


POLICY = CompactionPolicy(window=100, threshold=0.8, emergency=0.95, keep_turns=2)


def test_counter_is_four_chars_per_token_rounded_up() -> None:
    assert [default_token_counter("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_below_threshold_nothing_happens() -> None:
    assert next_compaction(POLICY, history(10, 10, 10), 0, 3) is None


def test_transient_tokens_count_toward_the_decision() -> None:
    segs = history(20, 20, 20, 0)  # 70 tokens
    assert next_compaction(POLICY, segs, 0, 3) is None
    step = next_compaction(POLICY, segs, 15, 3)  # 85: normal
    assert step is not None
    assert not isinstance(step, Exceeded)
    assert (step.level, step.first_turn, step.last_turn) == ("normal", 0, 0)


def test_normal_clears_only_turns_older_than_keep_turns() -> None:
    step = next_compaction(POLICY, history(20, 20, 20, 15, 0), 0, 4)  # 85 tokens
    assert not isinstance(step, Exceeded)
    assert step is not None
    assert (step.first_turn, step.last_turn) == (0, 1)


def test_normal_with_nothing_old_enough_defers() -> None:
    assert next_compaction(POLICY, history(40, 42, 0), 0, 2) is None


def test_emergency_clears_all_but_the_last_completed_turn() -> None:
    step = next_compaction(POLICY, history(40, 30, 20, 0), 0, 3)  # 100 tokens
    assert not isinstance(step, Exceeded)
    assert step is not None
    assert (step.level, step.first_turn, step.last_turn) == ("emergency", 0, 1)


def test_emergency_with_nothing_to_clear_is_exceeded() -> None:
    decision = next_compaction(POLICY, history(90, 0), 0, 1)
    assert isinstance(decision, Exceeded)
    assert "no turn left to clear" in decision.reason


def test_span_starts_after_the_last_reduction() -> None:
    segs = history(30, 30, 30, 0)
    first = next_compaction(POLICY, segs, 0, 3)
    assert not isinstance(first, Exceeded)
    assert first is not None
    segs = apply_reduction(segs, first, 5)
    assert [s.kind for s in segs] == ["preamble", "reduction", "turn", "turn"]


@given(st.lists(st.integers(1, 40), min_size=2, max_size=12), st.integers(0, 20))
def test_a_reduction_keeps_order_and_removes_exactly_its_turns(
    sizes: list[int], extra: int
) -> None:
    segs = history(*sizes, 0)
    turn = len(sizes)
    step = next_compaction(CompactionPolicy(window=50, keep_turns=1), segs, extra, turn)
    if step is None or isinstance(step, Exceeded):
        return
    after = apply_reduction(segs, step, 1)
    turns = [s.first_turn for s in after if s.kind == "turn"]
    assert turns == [t for t in range(turn + 1) if not step.first_turn <= t <= step.last_turn]
    assert turns == sorted(turns)
    cleared = sum(sizes[step.first_turn : step.last_turn + 1])
    assert total_tokens(after) == total_tokens(segs) - cleared + 1


BUDGET = SummaryBudget(
    max_calls=2, max_input_chars=1000, timeout_s=1, expected_summary_bytes=50, cost_floor_multiple=4
)


def test_budget_refusals_in_order() -> None:
    assert BUDGET.refusal(0, 500) is None
    assert BUDGET.refusal(2, 500) == "budget_exhausted"
    assert BUDGET.refusal(0, 1001) == "over_budget"
    assert BUDGET.refusal(0, 199) == "below_floor"
    assert BUDGET.refusal(0, 200) is None


def test_never_calls_shows_the_arithmetic() -> None:
    assert BUDGET.never_calls() is None
    tight = SummaryBudget(3, 1000, 1, 400, 4)
    assert tight.never_calls() == (
        "expected_summary_bytes 400 x cost_floor_multiple 4 = 1600 > max_input_chars 1000"
    )
    assert SummaryBudget(0, 1000, 1, 1, 1).never_calls() == "max_calls is 0"


def test_the_run_compares_the_floor_exactly_as_validate_does() -> None:
    # before, validate said 100 x 0.07 = 7 fits 7 characters while the run computed the
    # float 7.000000000000001 and refused every span below the floor
    budget = SummaryBudget(2, 7, 5, 100, 0.07)
    assert budget.never_calls() is None
    assert budget.refusal(0, 7) is None
    assert budget.refusal(0, 6) == "below_floor"
    assert SummaryBudget(2, 7, 5, 1, float("inf")).refusal(0, 7) == "below_floor"


@pytest.mark.parametrize(
    ("size", "multiple", "shown"),
    [
        (9223372036854775807, 1e308, "cost_floor_multiple 1e+308 = 9.223372036854775807e+326"),
        (400, 4, "cost_floor_multiple 4 = 1600"),
        (999, 1.0011, "cost_floor_multiple 1.0011 = 1000.0989"),
        (10**12, 1e-7, "cost_floor_multiple 1e-7 = 100000"),
    ],
)
def test_never_calls_shows_every_number_in_one_form(size: int, multiple: float, shown: str) -> None:
    why = SummaryBudget(1, 1, 1, size, multiple).never_calls()
    assert why is not None
    assert shown in why
