"""A batch-wide budget: `--max-model-calls` and `--max-tokens` over every case of a batch.

Each case keeps its own budget (the pipeline's `budget:`); a `PooledMeter` is
the case's usage meter that also asks one `BudgetPool` shared by the whole
batch. Reservations, attempts and settled usage count in both, with the same
rules as the case's own meter (docs/architecture.md §7): outstanding
reservations count as calls, and their input estimates and answer caps as
tokens, so concurrent cases never take the batch past its cap. A call's answer
cap is bounded by what remains of the batch's `--max-tokens` (`try_reserve`, one
step) and then by the case's own budget. Every change a case makes is one pool
step (`try_take` checks and counts at once; settling a reservation moves its
call from held to spent in one `add`): between two steps of one case, the case
of another worker may act, and must never see a held or made call as free. A
case refused by the batch's cap stops with the usual
`model_call_budget_exhausted` or `token_budget_exhausted`, its note naming the
batch's cap and the flag that sets it (`BatchLimits.cap`, the meter's
`refused_cap`), not the pipeline's own budget.

Pools: `LocalPool` (one event loop, plain counters), `SharedPool` (counters
in shared memory under one lock, for the worker processes of the `process`
executor; it pickles into the pool's initializer) and the Ray executor's pool
(a `LocalPool` inside one Ray actor, `_ray`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from converge_dsl.clock import Clock
from converge_dsl.engine import Budget, StopReason, UsageMeter
from converge_dsl.engine.budget import OuterCap, answer_room

POOL_POLL_S = 0.01
"""How often a case whose call waits for tokens held by other cases' calls looks again."""


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """The batch-wide caps (None: no cap)."""

    max_model_calls: int | None = None
    max_tokens: int | None = None

    @property
    def any(self) -> bool:
        return self.max_model_calls is not None or self.max_tokens is not None

    def cap(self, reason: StopReason) -> OuterCap | None:
        """The cap that refuses with `reason`, named by the flag that sets it."""
        if reason is StopReason.MODEL_CALL_BUDGET_EXHAUSTED and self.max_model_calls is not None:
            return OuterCap("--max-model-calls", self.max_model_calls, "the batch")
        if reason is StopReason.TOKEN_BUDGET_EXHAUSTED and self.max_tokens is not None:
            return OuterCap("--max-tokens", self.max_tokens, "the batch")
        return None


class BudgetPool(Protocol):
    """Usage of the whole batch: calls and tokens spent, plus those held by reservations.

    `try_take` checks the caps and counts in one step (atomic across the
    batch's processes or actors), so two cases never both take the last call.
    """

    limits: BatchLimits

    def try_take(self, calls: int, held_calls: int, held_tokens: int) -> StopReason | None:
        """Count the new `calls` and holds unless a cap forbids one more call (its reason)."""
        ...

    def add(self, calls: int, tokens: int, held_calls: int, held_tokens: int) -> None:
        """Count usage (negative holds give reservations back)."""
        ...

    def blocked(self, extra_calls: int) -> StopReason | None:
        """The cap that forbids `extra_calls` more calls now, or None."""
        ...

    def try_reserve(
        self, estimate: int, wanted: int | None
    ) -> tuple[StopReason | None, int | None]:
        """Hold one call, `estimate` and the answer cap it gets (`answer_room`) in one step:
        `(None, cap)`, or the cap's reason that refuses it and None."""
        ...

    def held_tokens(self) -> int:
        """The tokens held by the reservations of every case."""
        ...


def reserve_in(
    limits: BatchLimits, counts: Sequence[int], estimate: int, wanted: int | None
) -> tuple[StopReason | None, int | None]:
    """What `try_reserve` decides on `counts`: the refusing reason, or None and the cap."""
    reason = blocked_by(limits, counts, 1)
    if reason is not None:
        return reason, None
    fits, cap = answer_room(limits.max_tokens, counts[1] + counts[3], estimate, wanted)
    return (None, cap) if fits else (StopReason.TOKEN_BUDGET_EXHAUSTED, None)


def blocked_by(limits: BatchLimits, counts: Sequence[int], extra_calls: int) -> StopReason | None:
    """The cap of `limits` that `counts` (calls, tokens, held calls, held tokens) reach."""
    calls, tokens, held_calls, held_tokens = counts
    if limits.max_model_calls is not None and (
        calls + held_calls + extra_calls > limits.max_model_calls
    ):
        return StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    if limits.max_tokens is not None and tokens + held_tokens >= limits.max_tokens:
        return StopReason.TOKEN_BUDGET_EXHAUSTED
    return None


class LocalPool:
    """The pool of a batch run on one event loop (or one Ray actor): plain counters."""

    def __init__(self, limits: BatchLimits) -> None:
        self.limits = limits
        self._counts = [0, 0, 0, 0]

    def try_take(self, calls: int, held_calls: int, held_tokens: int) -> StopReason | None:
        reason = blocked_by(self.limits, self._counts, 1)
        if reason is None:
            self.add(calls, 0, held_calls, held_tokens)
        return reason

    def add(self, calls: int, tokens: int, held_calls: int, held_tokens: int) -> None:
        for i, value in enumerate((calls, tokens, held_calls, held_tokens)):
            self._counts[i] += value

    def blocked(self, extra_calls: int) -> StopReason | None:
        return blocked_by(self.limits, self._counts, extra_calls)

    def try_reserve(
        self, estimate: int, wanted: int | None
    ) -> tuple[StopReason | None, int | None]:
        reason, cap = reserve_in(self.limits, self._counts, estimate, wanted)
        if reason is None:
            self.add(0, 0, 1, max(0, estimate) + (cap or 0))
        return reason, cap

    def held_tokens(self) -> int:
        return self._counts[3]

    def counts(self) -> tuple[int, int, int, int]:
        a, b, c, d = self._counts
        return a, b, c, d


class SharedPool:
    """The pool of a batch run by worker processes: four shared counters under one lock."""

    def __init__(self, limits: BatchLimits, context: Any = None) -> None:
        ctx = context or multiprocessing.get_context("spawn")
        self.limits = limits
        self._lock = ctx.Lock()
        self._counts = ctx.Array("q", 4, lock=False)

    def try_take(self, calls: int, held_calls: int, held_tokens: int) -> StopReason | None:
        with self._lock:
            reason = blocked_by(self.limits, self._counts[:], 1)
            if reason is None:
                self._add(calls, 0, held_calls, held_tokens)
        return reason

    def add(self, calls: int, tokens: int, held_calls: int, held_tokens: int) -> None:
        with self._lock:
            self._add(calls, tokens, held_calls, held_tokens)

    def _add(self, *values: int) -> None:
        for i, value in enumerate(values):
            self._counts[i] += value

    def blocked(self, extra_calls: int) -> StopReason | None:
        with self._lock:
            return blocked_by(self.limits, self._counts[:], extra_calls)

    def try_reserve(
        self, estimate: int, wanted: int | None
    ) -> tuple[StopReason | None, int | None]:
        with self._lock:
            reason, cap = reserve_in(self.limits, self._counts[:], estimate, wanted)
            if reason is None:
                self._add(0, 0, 1, max(0, estimate) + (cap or 0))
        return reason, cap

    def held_tokens(self) -> int:
        with self._lock:
            return int(self._counts[3])


class PooledMeter(UsageMeter):
    """A case's usage meter that also counts against the batch's `BudgetPool`.

    A reservation or a further attempt is taken from the batch first (refused
    there: the case stops with that budget reason), then from the case's own
    budget (refused there: the batch gets it back). A refusal by the batch is
    remembered with the batch's cap (`refused_cap`).
    """

    __slots__ = ("_own_only", "_pool", "_pool_said")

    def __init__(self, budget: Budget, pool: BudgetPool, *, clock: Clock | None = None) -> None:
        super().__init__(budget, clock=clock)
        self._pool = pool
        self._own_only = False
        # The reason of the batch's refusal in the last check, which the caller's
        # `_refuse` (right after it, no await between) records with the batch's cap.
        self._pool_said: StopReason | None = None

    def _blocked(self, *, extra_calls: int) -> StopReason | None:
        own = super()._blocked(extra_calls=extra_calls)
        self._pool_said = None
        if own is not None or self._own_only:
            return own
        self._pool_said = self._pool.blocked(extra_calls)
        return self._pool_said

    def _refuse(self, reason: StopReason, cap: OuterCap | None = None) -> None:
        if cap is None and self._pool_said is reason:
            cap = self._pool.limits.cap(reason)
        self._pool_said = None
        super()._refuse(reason, cap)

    def _grant(
        self, tokens_estimate: int, answer_cap: int | None
    ) -> tuple[StopReason | None, int | None]:
        estimate = max(0, tokens_estimate)
        reason, cap = self._pool.try_reserve(estimate, answer_cap)
        self._pool_said = reason
        if reason is not None:
            return reason, None
        pool_held = estimate + (cap or 0)
        self._own_only = True
        try:
            reason, own_cap = super()._grant(estimate, cap)
        finally:
            self._own_only = False
        if reason is not None:
            self._pool.add(0, 0, -1, -pool_held)
            return reason, None
        if own_cap != cap:  # the case's own budget left less: the batch gets the rest back
            self._pool.add(0, 0, 0, estimate + (own_cap or 0) - pool_held)
        return None, own_cap

    async def _wait_freed(self) -> bool:
        if self._held_tokens > 0:
            return await super()._wait_freed()
        if self._clock is None or self._pool.held_tokens() <= 0:
            return False
        await self._clock.sleep(POOL_POLL_S)  # held by another case's call: look again
        return True

    def allow_attempt(self) -> bool:
        reason = self._pool.try_take(1, 0, 0)
        if reason is not None:
            self._refuse(reason, self._pool.limits.cap(reason))
            return False
        self._own_only = True
        try:
            allowed = super().allow_attempt()
        finally:
            self._own_only = False
        if not allowed:
            self._pool.add(-1, 0, 0, 0)
        return allowed

    def record(
        self, *, model_calls: int = 1, input_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        super().record(
            model_calls=model_calls, input_tokens=input_tokens, output_tokens=output_tokens
        )
        self._pool.add(model_calls, input_tokens + output_tokens, 0, 0)

    def _unhold(self, tokens: int) -> None:
        super()._unhold(tokens)
        self._pool.add(0, 0, -1, -tokens)

    def _settle(self, held_tokens: int, tokens_in: int, tokens_out: int) -> None:
        # One pool step: the call moves from held to spent at once. Given back and
        # then counted (two steps), it looked free in between, and a case of another
        # worker could take it: one call over the batch's cap.
        UsageMeter._unhold(self, held_tokens)
        UsageMeter.record(self, model_calls=1, input_tokens=tokens_in, output_tokens=tokens_out)
        self._pool.add(1, tokens_in + tokens_out, -1, -held_tokens)
