"""`RetryPolicy`: what to do after a failed provider attempt, as a pure decision.

In the spirit of urllib3's `Retry`: the policy is an immutable value holding
both its limits and the progress of one call (waits taken, seconds waited,
accounts rate-limited in this call). `policy.next(error, failed, roster)`
returns a `Decision`: the action, the wait before the next attempt, the
account changes to make, and the policy for the next attempt. It performs no
I/O and changes nothing; the caller applies the decision. The only outside
input is `jitter`, the injected random source, read once per computed backoff.

The rules, per call:
- `E_AUTH` (401/403): the account is disabled and the selection moves to the
  next usable one; when none is left, `REJECTED`.
- `E_RATE_LIMITED` (429): fail over at once to the first usable account not
  yet rate-limited in this call; when all are, select the first usable one
  again and treat the error as retryable below.
- Retryable errors (5xx, 408, timeouts, connection errors, 429 as above):
  wait `Retry-After` when given, else exponential backoff with jitter, and
  retry, at most `retries` times and `max_wait_s` seconds of waiting in all.
- Anything else: `GIVE_UP` (raise the error).
The budget gate (the run's attempt gate and deadline) is not the policy's
business: the caller asks it before acting on a `RETRY` or `FAILOVER`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from converge_dsl.models._accounts import RosterState
from converge_dsl.models.port import ModelError, ModelErrorCode


class Action(StrEnum):
    RETRY = "retry"
    """Sleep `wait` seconds, then try again."""
    FAILOVER = "failover"
    """Try again at once, on the account the decision selects."""
    GIVE_UP = "give_up"
    """Raise the error as it is."""
    REJECTED = "rejected"
    """Every account of the roster was rejected: raise an `E_AUTH` naming them all."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of `RetryPolicy.next`.

    `disable` and `select` are account changes to make whatever the action
    (they outlive the call: later calls stick to the account that worked);
    `policy` is the policy of the next attempt.
    """

    action: Action
    policy: RetryPolicy
    wait: float = 0.0
    disable: str | None = None
    select: str | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Limits of retrying one call, and that call's progress so far (`attempt`,
    `waited`, `rate_limited`). `jitter() -> [0, 1)` is the injected randomness."""

    jitter: Callable[[], float] = field(compare=False, repr=False)
    retries: int = 3
    max_wait_s: float = 60.0
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 20.0
    attempt: int = 0
    waited: float = 0.0
    rate_limited: frozenset[str] = frozenset()

    def next(self, error: ModelError, failed: str, roster: RosterState) -> Decision:
        """Decide what follows `error`, raised by an attempt on the account `failed`,
        given the roster as it is now."""
        if error.code is ModelErrorCode.AUTH:
            return self._after_rejection(failed, roster)
        if error.code is ModelErrorCode.RATE_LIMITED:
            return self._after_rate_limit(error, failed, roster)
        return self._retry(error)

    def backoff(self, retry_after: float | None) -> float:
        """Seconds to wait before retry number `attempt + 1`: `retry_after` when the
        provider gave one, else a random point in the upper half of
        `min(cap, base * 2**attempt)`."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.backoff_cap_s, math.ldexp(self.backoff_base_s, self.attempt))
        return ceiling / 2 + self.jitter() * ceiling / 2

    def _after_rejection(self, failed: str, roster: RosterState) -> Decision:
        after = roster.disable(failed)
        if not after.usable():
            return Decision(Action.REJECTED, self, disable=failed)
        return Decision(Action.FAILOVER, self, disable=failed, select=after.current())

    def _after_rate_limit(self, error: ModelError, failed: str, roster: RosterState) -> Decision:
        limited = self.rate_limited | {failed}
        other = roster.next_excluding(limited)
        if other is not None:
            return Decision(Action.FAILOVER, replace(self, rate_limited=limited), select=other)
        # Every account is rate-limited: back to the first one, after a wait.
        first = roster.next_excluding(frozenset())
        decision = replace(self, rate_limited=frozenset())._retry(error)
        return decision if first is None else replace(decision, select=first)

    def _retry(self, error: ModelError) -> Decision:
        if not error.retryable or self.attempt >= self.retries:
            return Decision(Action.GIVE_UP, self)
        wait = self.backoff(error.retry_after)
        if self.waited + wait > self.max_wait_s:
            return Decision(Action.GIVE_UP, self)
        after = replace(self, attempt=self.attempt + 1, waited=self.waited + wait)
        return Decision(Action.RETRY, after, wait=wait)
