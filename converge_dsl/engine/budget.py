"""Budgets, the usage meter, and the reasons a run stops.

`Budget` bounds a run. `UsageMeter` counts model calls and tokens and knows the
run's wall-clock deadline: the engine owns one (`Engine.usage`). Budgets are
reservations (docs/architecture.md §7): before a model call, an LLM suggestor,
agent or summarizer takes a `Reservation` (`reserve`) of one call and its token
estimate, and settles it with the real usage (`settle`) or gives it back
(`release`). Outstanding reservations count against the limits, so concurrent
calls never take the meter past `max_model_calls`. Every further attempt of a
call that reaches a server (a provider retry or failover) consumes one more
call through `allow_attempt`, the models' attempt gate. A refused call is
remembered (`refused`) so the engine stops the run with the matching reason
after the cycle instead of reporting a fixed point. `can_call`/`record` remain
for callers that meter after the fact.

The meter also counts what each suggestor spent (`spent_by`, `refused_by`):
the engine runs every `execute` with `SPENDER` set to the suggestor's name, so
calls, attempts and tokens are attributed to whoever made them, which is how
a budget stop names the suggestors that spent the budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from converge_dsl.clock import Clock

# The suggestor whose `execute` is running in this task (None outside one).
SPENDER: ContextVar[str | None] = ContextVar("converge_dsl_spender", default=None)


class StopReason(StrEnum):
    """Why a run stopped (docs/architecture.md §7)."""

    CONVERGED = "converged"
    CYCLE_BUDGET_EXHAUSTED = "cycle_budget_exhausted"
    FACT_BUDGET_EXHAUSTED = "fact_budget_exhausted"
    TOKEN_BUDGET_EXHAUSTED = "token_budget_exhausted"
    MODEL_CALL_BUDGET_EXHAUSTED = "model_call_budget_exhausted"
    TIME_BUDGET_EXHAUSTED = "time_budget_exhausted"
    INVARIANT_VIOLATED = "invariant_violated"
    HITL_PAUSE = "hitl_pause"
    CANCELLED = "cancelled"
    ERROR = "error"


# The wall-clock limit of a run that sets none (`budget.max_wall_s` raises it):
# no run, and no template, expression or validation inside it, runs unbounded.
DEFAULT_MAX_WALL_S = 600.0


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one run. `None` means unlimited (`max_wall_s` defaults to 600 s)."""

    max_cycles: int = 100
    max_facts: int = 10000
    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_wall_s: float | None = DEFAULT_MAX_WALL_S
    max_concurrency: int = 32

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Model usage so far. Tokens count input plus output against `max_tokens`."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class TokenUsage(Protocol):
    """What a settled call reports: the model port's `Usage` has these fields."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class Reservation:
    """One model call (and its token estimate) held against the meter until settled.

    `settle(usage)` counts the call with its real tokens; `release()` gives the
    call back (it never reached a model). Only the first of the two has an
    effect; later calls are ignored, so a `finally: release()` is always safe.
    """

    __slots__ = ("_meter", "_open", "_tokens")

    def __init__(self, meter: UsageMeter, tokens: int) -> None:
        self._meter = meter
        self._tokens = tokens
        self._open = True

    def settle(self, usage: TokenUsage | None = None) -> None:
        """Count the reserved call with `usage`'s tokens (None: no tokens known)."""
        if not self._open:
            return
        self._open = False
        tokens_in = 0 if usage is None else usage.input_tokens
        tokens_out = 0 if usage is None else usage.output_tokens
        # The call is counted before its hold is given back: a meter whose counts
        # others read in between (a batch's shared pool) never sees it as neither.
        self._meter.record(model_calls=1, input_tokens=tokens_in, output_tokens=tokens_out)
        self._meter._unhold(self._tokens)

    def release(self) -> None:
        """Give the reserved call back: it was never made."""
        self._close()

    def _close(self) -> bool:
        if not self._open:
            return False
        self._open = False
        self._meter._unhold(self._tokens)  # the meter's own bookkeeping
        return True


class UsageMeter:
    """Counts model calls and tokens against a `Budget`; with a clock, watches the deadline too."""

    __slots__ = (
        "_budget",
        "_by",
        "_calls",
        "_clock",
        "_deadline",
        "_held_calls",
        "_held_tokens",
        "_input",
        "_output",
        "_refused",
        "_refused_by",
    )

    def __init__(
        self, budget: Budget, start: UsageTotals | None = None, *, clock: Clock | None = None
    ) -> None:
        self._budget = budget
        self._clock = clock
        self._deadline: float | None = None
        self._refused: StopReason | None = None
        self._refused_by: str | None = None
        self._by: dict[str, list[int]] = {}
        self._calls = self._input = self._output = 0
        self._held_calls = self._held_tokens = 0
        self.restore(start or UsageTotals())

    def begin(self, started: float) -> None:
        """Start a run at clock time `started`: the deadline is `started + max_wall_s`."""
        limit = self._budget.max_wall_s
        self._deadline = None if limit is None or self._clock is None else started + limit
        self._refused = None
        self._refused_by = None
        self._by = {}

    def record(
        self, *, model_calls: int = 1, input_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        """Add one model call's (or several calls') usage, counted for the current `SPENDER`."""
        self._calls += model_calls
        self._input += input_tokens
        self._output += output_tokens
        self._spend(model_calls, input_tokens, output_tokens)

    def _spend(self, calls: int, tokens_in: int, tokens_out: int) -> None:
        name = SPENDER.get()
        if name is not None:
            row = self._by.get(name)
            if row is None:
                row = self._by[name] = [0, 0, 0]
            row[0] += calls
            row[1] += tokens_in
            row[2] += tokens_out

    def spent_by(self) -> Mapping[str, UsageTotals]:
        """Suggestor name -> what it spent since `begin` (calls, attempts and tokens).

        A resumed run restores the totals but not this breakdown: the totals may
        exceed its sum by what earlier runs spent.
        """
        return {name: UsageTotals(*row) for name, row in self._by.items()}

    @property
    def refused_by(self) -> str | None:
        """The suggestor whose call or attempt was refused first (None: none, or not in one)."""
        return self._refused_by

    @property
    def totals(self) -> UsageTotals:
        return UsageTotals(self._calls, self._input, self._output)

    @property
    def refused(self) -> StopReason | None:
        """Why the first refused `can_call()` of this run said no (None: nothing refused)."""
        return self._refused

    @property
    def deadline(self) -> float | None:
        """The run's deadline on the meter's clock (None: no time budget or no clock)."""
        return self._deadline

    def reserve(self, tokens_estimate: int = 0) -> Reservation | None:
        """Hold one model call and `tokens_estimate` tokens, or None when a limit forbids it.

        Outstanding reservations count as calls (and their estimates as tokens), so
        concurrent callers never pass `max_model_calls`. A refusal is remembered
        (see `refused`).
        """
        reason = self._blocked(extra_calls=1)
        if reason is not None:
            self._refuse(reason)
            return None
        self._held_calls += 1
        self._held_tokens += max(0, tokens_estimate)
        return Reservation(self, max(0, tokens_estimate))

    def allow_attempt(self) -> bool:
        """The attempt gate: consume one call for a further attempt of a reserved call.

        A provider retry or failover reaches a server again, so it counts as a
        model call; False (remembered in `refused`) when the budget has none left.
        """
        reason = self._blocked(extra_calls=1)
        if reason is not None:
            self._refuse(reason)
            return False
        self._calls += 1
        self._spend(1, 0, 0)
        return True

    def note_budget_refusal(self) -> StopReason:
        """A model refused an attempt for the run's budget: the reason to stop with.

        The remembered refusal if there is one (the attempt gate said no), else
        the time budget (the deadline left no room for the retry).
        """
        self._refuse(StopReason.TIME_BUDGET_EXHAUSTED)
        assert self._refused is not None
        return self._refused

    def can_call(self) -> bool:
        """False once the model-call or token budget is reached (counting outstanding
        reservations) or the deadline has passed.

        A refusal is remembered (see `refused`).
        """
        reason = self.limit_reached()
        if reason is not None:
            self._refuse(reason)
        return reason is None

    def limit_reached(self) -> StopReason | None:
        """The limit that forbids another model call now (calls, tokens, then time), or None.

        Outstanding reservations count as made.
        """
        return self._blocked(extra_calls=1)

    def _blocked(self, *, extra_calls: int) -> StopReason | None:
        """The limit that forbids `extra_calls` more calls beside the held ones, or None."""
        budget = self._budget
        calls = self._calls + self._held_calls + extra_calls
        if budget.max_model_calls is not None and calls > budget.max_model_calls:
            return StopReason.MODEL_CALL_BUDGET_EXHAUSTED
        tokens = self._input + self._output + self._held_tokens
        if budget.max_tokens is not None and tokens >= budget.max_tokens:
            return StopReason.TOKEN_BUDGET_EXHAUSTED
        deadline, clock = self._deadline, self._clock
        if deadline is not None and clock is not None and clock.monotonic() >= deadline:
            return StopReason.TIME_BUDGET_EXHAUSTED
        return None

    def _refuse(self, reason: StopReason) -> None:
        if self._refused is None:
            self._refused = reason
            self._refused_by = SPENDER.get()

    def _unhold(self, tokens: int) -> None:
        self._held_calls -= 1
        self._held_tokens -= tokens

    def exhausted(self, *, reached: bool) -> StopReason | None:
        """The budget stop reason if usage has reached (`reached=True`) or gone over a limit."""
        budget = self._budget
        calls, tokens = self._calls, self._input + self._output
        if budget.max_model_calls is not None and (
            calls >= budget.max_model_calls if reached else calls > budget.max_model_calls
        ):
            return StopReason.MODEL_CALL_BUDGET_EXHAUSTED
        if budget.max_tokens is not None and (
            tokens >= budget.max_tokens if reached else tokens > budget.max_tokens
        ):
            return StopReason.TOKEN_BUDGET_EXHAUSTED
        return None

    def restore(self, totals: UsageTotals) -> None:
        """Set the counts to `totals` (a resumed run continues from its checkpoint's usage)."""
        self._calls = totals.model_calls
        self._input = totals.input_tokens
        self._output = totals.output_tokens
