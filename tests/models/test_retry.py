"""The retry and failover policy on its own: pure decisions, no server, no clock."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.models import ModelError, ModelErrorCode
from converge_dsl.models._accounts import RosterState
from converge_dsl.models._retry import Action, RetryPolicy

SOLO = RosterState(("main",))
DUO = RosterState(("main", "backup"))
TRIO = RosterState(("a", "b", "c"))


class Jitter:
    """A fixed random source that counts how often it was read."""

    def __init__(self, value: float = 0.5) -> None:
        self.value = value
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.value


def failure(
    code: ModelErrorCode = ModelErrorCode.PROVIDER,
    *,
    retryable: bool = True,
    retry_after: float | None = None,
) -> ModelError:
    return ModelError(code, "boom", retryable=retryable, retry_after=retry_after)


def policy(jitter: Jitter | None = None, **limits: Any) -> RetryPolicy:
    return RetryPolicy(jitter or Jitter(), **limits)


def test_retryable_errors_back_off_exponentially_with_jitter_until_the_retries_run_out() -> None:
    jitter = Jitter(0.5)
    current = policy(jitter)
    waits = []
    while True:
        decision = current.next(failure(), "main", SOLO)
        if decision.action is Action.GIVE_UP:
            break
        assert decision.action is Action.RETRY
        assert decision.disable is None
        assert decision.select is None
        waits.append(decision.wait)
        current = decision.policy
    # ceiling = base * 2**attempt; the wait is ceiling/2 + jitter * ceiling/2
    assert waits == [0.375, 0.75, 1.5]
    assert current.attempt == 3
    assert current.waited == pytest.approx(2.625)
    assert jitter.reads == 3


def test_the_backoff_is_capped() -> None:
    capped = policy(Jitter(1.0), backoff_base_s=4.0, backoff_cap_s=5.0)
    assert capped.backoff(None) == 4.0
    later = capped.next(failure(), "main", SOLO).policy
    assert later.backoff(None) == 5.0


def test_retry_after_is_the_wait_and_no_randomness_is_read() -> None:
    jitter = Jitter()
    decision = policy(jitter).next(failure(retry_after=7.0), "main", SOLO)
    assert (decision.action, decision.wait) == (Action.RETRY, 7.0)
    assert jitter.reads == 0


def test_a_wait_past_the_total_wait_limit_gives_up() -> None:
    decision = policy(max_wait_s=5.0).next(failure(retry_after=6.0), "main", SOLO)
    assert decision.action is Action.GIVE_UP
    within = policy(max_wait_s=5.0).next(failure(retry_after=5.0), "main", SOLO)
    assert within.action is Action.RETRY


@pytest.mark.parametrize(
    "code", [ModelErrorCode.WIRE, ModelErrorCode.CONFIDENTIAL, ModelErrorCode.PROVIDER]
)
def test_errors_that_are_not_retryable_give_up_at_once(code: ModelErrorCode) -> None:
    jitter = Jitter()
    decision = policy(jitter).next(failure(code, retryable=False), "main", DUO)
    assert decision.action is Action.GIVE_UP
    assert jitter.reads == 0


def test_zero_retries_never_retries() -> None:
    assert policy(retries=0).next(failure(), "main", SOLO).action is Action.GIVE_UP


def test_a_rejected_account_is_disabled_and_the_next_usable_one_selected() -> None:
    first = policy()
    decision = first.next(failure(ModelErrorCode.AUTH, retryable=False), "main", DUO)
    assert decision.action is Action.FAILOVER
    assert (decision.disable, decision.select, decision.wait) == ("main", "backup", 0.0)
    assert decision.policy == first  # failovers spend no retry


def test_failover_after_a_rejection_follows_the_selection_round_the_roster() -> None:
    roster = TRIO.select("c").disable("a")
    decision = policy().next(failure(ModelErrorCode.AUTH, retryable=False), "c", roster)
    assert (decision.action, decision.select) == (Action.FAILOVER, "b")


def test_when_every_account_is_rejected_the_roster_is_rejected() -> None:
    roster = DUO.disable("main").select("backup")
    decision = policy().next(failure(ModelErrorCode.AUTH, retryable=False), "backup", roster)
    assert decision.action is Action.REJECTED
    assert decision.disable == "backup"
    assert decision.select is None


def test_a_rate_limit_fails_over_to_an_account_not_yet_limited_in_this_call() -> None:
    limited = failure(ModelErrorCode.RATE_LIMITED, retry_after=2.0)
    first = policy().next(limited, "a", TRIO)
    assert (first.action, first.select, first.wait) == (Action.FAILOVER, "b", 0.0)
    assert first.policy.rate_limited == {"a"}
    second = first.policy.next(limited, "b", TRIO.select("b"))
    assert (second.action, second.select) == (Action.FAILOVER, "c")
    assert second.policy.attempt == 0


def test_when_every_account_is_rate_limited_it_waits_on_the_first_one() -> None:
    limited = failure(ModelErrorCode.RATE_LIMITED, retry_after=2.0)
    after_main = policy().next(limited, "main", DUO).policy
    decision = after_main.next(limited, "backup", DUO.select("backup"))
    assert (decision.action, decision.select, decision.wait) == (Action.RETRY, "main", 2.0)
    assert decision.policy.rate_limited == frozenset()
    assert decision.policy.attempt == 1


def test_rate_limits_past_the_retries_give_up_yet_return_to_the_first_account() -> None:
    limited = failure(ModelErrorCode.RATE_LIMITED)
    decision = policy(retries=0).next(limited, "main", SOLO.select("main"))
    assert (decision.action, decision.select) == (Action.GIVE_UP, "main")


def test_disabled_accounts_are_skipped_by_rate_limit_failover() -> None:
    roster = TRIO.disable("b")
    decision = policy().next(failure(ModelErrorCode.RATE_LIMITED), "a", roster)
    assert decision.select == "c"


def test_the_policy_and_the_roster_are_values() -> None:
    start = policy()
    start.next(failure(ModelErrorCode.RATE_LIMITED), "a", TRIO)
    start.next(failure(), "a", TRIO)
    assert start.attempt == 0
    assert start.waited == 0.0
    assert start.rate_limited == frozenset()
    with pytest.raises(FrozenInstanceError):
        start.attempt = 1  # type: ignore[misc]
    assert TRIO.disable("a").current() == "b"
    assert TRIO.current() == "a"
    assert TRIO.select("nobody") is TRIO


@given(
    retries=st.integers(0, 6),
    max_wait=st.floats(0, 30),
    jitter=st.floats(0, 0.999),
    retry_after=st.none() | st.floats(0, 10),
)
def test_retries_and_waiting_stay_within_their_limits(
    retries: int, max_wait: float, jitter: float, retry_after: float | None
) -> None:
    current = policy(Jitter(jitter), retries=retries, max_wait_s=max_wait)
    total = 0.0
    for _ in range(retries + 2):
        decision = current.next(failure(retry_after=retry_after), "main", SOLO)
        if decision.action is Action.GIVE_UP:
            break
        total += decision.wait
        current = decision.policy
    else:
        pytest.fail("the policy never gave up")
    assert current.attempt <= retries
    assert total == pytest.approx(current.waited)
    assert total <= max_wait
