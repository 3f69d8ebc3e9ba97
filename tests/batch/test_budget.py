"""The batch-wide budget: one pool for every case's meter, reservations counted at once."""

from __future__ import annotations

import pytest

from converge_dsl.batch import BatchLimits, LocalPool, PooledMeter, SharedPool
from converge_dsl.engine import Budget, StopReason
from converge_dsl.engine.budget import OuterCap


@pytest.mark.parametrize("make_pool", [LocalPool, SharedPool])
def test_outstanding_reservations_of_all_cases_count(make_pool) -> None:  # type: ignore[no-untyped-def]
    pool = make_pool(BatchLimits(max_model_calls=2))
    first, second, third = (PooledMeter(Budget(max_model_calls=5), pool) for _ in range(3))
    held = [first.reserve(10), second.reserve(10)]
    assert all(r is not None for r in held)
    assert third.reserve(10) is None
    assert third.refused == StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    held[0].release()  # type: ignore[union-attr]
    again = third.reserve(10)
    assert again is not None
    again.settle()
    assert not first.can_call()
    assert not first.allow_attempt()


def test_a_case_refused_by_its_own_budget_gives_the_batch_its_call_back() -> None:
    pool = LocalPool(BatchLimits(max_model_calls=3))
    small = PooledMeter(Budget(max_model_calls=1), pool)
    reservation = small.reserve()
    assert reservation is not None
    assert small.reserve() is None  # its own cap
    assert pool.counts() == (0, 0, 1, 0)
    reservation.settle()
    assert pool.counts() == (1, 0, 0, 0)
    other = PooledMeter(Budget(), pool)
    assert other.allow_attempt()
    assert other.allow_attempt()
    assert not other.allow_attempt()
    assert pool.counts() == (3, 0, 0, 0)


def test_tokens_count_against_the_batch() -> None:
    pool = LocalPool(BatchLimits(max_tokens=100))
    meter = PooledMeter(Budget(), pool)
    meter.record(model_calls=1, input_tokens=60, output_tokens=40)
    assert meter.reserve() is None
    assert meter.refused == StopReason.TOKEN_BUDGET_EXHAUSTED
    assert PooledMeter(Budget(), pool).limit_reached() == StopReason.TOKEN_BUDGET_EXHAUSTED


class _Contended(LocalPool):
    """A pool another case takes from between any two of this case's pool operations.

    Stands for the `process` and `ray` executors, where the pool is shared with
    other workers and nothing holds it between two operations of one case.
    """

    def __init__(self, limits: BatchLimits) -> None:
        super().__init__(limits)
        self.rival: PooledMeter | None = None
        self.taken: list[object] = []

    def add(self, calls: int, tokens: int, held_calls: int, held_tokens: int) -> None:
        super().add(calls, tokens, held_calls, held_tokens)
        if self.rival is not None:
            reservation = self.rival.reserve(0)
            if reservation is not None:
                self.taken.append(reservation)


@pytest.mark.parametrize("tokens", [0, 25])
def test_settling_a_call_is_one_pool_step_so_no_rival_takes_it_meanwhile(tokens: int) -> None:
    pool = _Contended(BatchLimits(max_model_calls=1))
    meter = PooledMeter(Budget(), pool)
    reservation = meter.reserve(tokens)
    assert reservation is not None
    pool.rival = PooledMeter(Budget(), pool)
    reservation.settle(_Usage(7, 3))
    assert pool.taken == []  # the settled call never looked free
    assert pool.counts() == (1, 10, 0, 0)
    assert meter.totals.model_calls == 1


def test_a_released_call_goes_back_to_the_batch_in_one_step() -> None:
    pool = _Contended(BatchLimits(max_model_calls=1))
    reservation = PooledMeter(Budget(), pool).reserve(5)
    assert reservation is not None
    pool.rival = PooledMeter(Budget(), pool)
    reservation.release()
    assert len(pool.taken) == 1  # the call was free again, and taken once
    assert pool.counts() == (0, 0, 1, 0)


class _Usage:
    def __init__(self, input_tokens: int, output_tokens: int) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens


class _Watched(LocalPool):
    """A pool that remembers the fewest calls (made and held) it ever counted after a hold."""

    def __init__(self, limits: BatchLimits) -> None:
        super().__init__(limits)
        self.fewest: int | None = None

    def add(self, calls: int, tokens: int, held_calls: int, held_tokens: int) -> None:
        super().add(calls, tokens, held_calls, held_tokens)
        made, _, held, _ = self.counts()
        self.fewest = made + held if self.fewest is None else min(self.fewest, made + held)


def test_a_settled_call_never_leaves_the_pool_between_held_and_made() -> None:
    # Other processes read a shared pool between two of a case's updates: a call
    # given back before it is counted would let one of them take the batch's last call.
    pool = _Watched(BatchLimits(max_model_calls=1))
    meter = PooledMeter(Budget(), pool)
    reservation = meter.reserve(5)
    assert reservation is not None
    reservation.settle()
    assert pool.counts() == (1, 0, 0, 0)
    assert pool.fewest == 1


@pytest.mark.parametrize("make_pool", [LocalPool, SharedPool])
def test_a_refusal_by_the_batch_names_the_batch_cap_and_its_flag(make_pool) -> None:  # type: ignore[no-untyped-def]
    pool = make_pool(BatchLimits(max_model_calls=1, max_tokens=1000))
    first, second = PooledMeter(Budget(max_model_calls=5), pool), PooledMeter(Budget(), pool)
    assert first.reserve() is not None
    assert second.reserve() is None
    assert second.refused_cap == OuterCap("--max-model-calls", 1, "the batch")
    third = PooledMeter(Budget(), pool)
    assert not third.allow_attempt()
    assert third.refused_cap == OuterCap("--max-model-calls", 1, "the batch")


def test_a_refusal_by_the_case_budget_names_no_batch_cap() -> None:
    pool = LocalPool(BatchLimits(max_model_calls=10, max_tokens=1000))
    meter = PooledMeter(Budget(max_model_calls=1), pool)
    assert meter.reserve(0, 10) is not None
    assert meter.reserve(0, 10) is None  # its own cap of 1
    assert meter.refused == StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert meter.refused_cap is None
    tokens = PooledMeter(Budget(max_tokens=10), pool)
    assert tokens.reserve(20) is None
    assert tokens.refused == StopReason.TOKEN_BUDGET_EXHAUSTED
    assert tokens.refused_cap is None


def test_a_token_refusal_by_the_batch_names_max_tokens() -> None:
    pool = LocalPool(BatchLimits(max_tokens=30))
    meter = PooledMeter(Budget(max_tokens=1000), pool)
    assert meter.reserve(40) is None
    assert meter.refused == StopReason.TOKEN_BUDGET_EXHAUSTED
    assert meter.refused_cap == OuterCap("--max-tokens", 30, "the batch")
