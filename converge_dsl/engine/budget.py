"""Budgets, the usage meter, and the reasons a run stops.

`Budget` bounds a run. `UsageMeter` counts model calls and tokens and knows the
run's wall-clock deadline: the engine owns one (`Engine.usage`), LLM suggestors,
agents and summarizers record into it and ask `can_call()` before every model
call. A refused call is remembered (`refused`) so the engine stops the run with
the matching reason after the cycle instead of reporting a fixed point.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from converge_dsl.clock import Clock


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


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one run. `None` means unlimited."""

    max_cycles: int = 100
    max_facts: int = 10000
    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_wall_s: float | None = None
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


class UsageMeter:
    """Counts model calls and tokens against a `Budget`; with a clock, watches the deadline too."""

    __slots__ = ("_budget", "_calls", "_clock", "_deadline", "_input", "_output", "_refused")

    def __init__(
        self, budget: Budget, start: UsageTotals | None = None, *, clock: Clock | None = None
    ) -> None:
        self._budget = budget
        self._clock = clock
        self._deadline: float | None = None
        self._refused: StopReason | None = None
        self._calls = self._input = self._output = 0
        self.restore(start or UsageTotals())

    def begin(self, started: float) -> None:
        """Start a run at clock time `started`: the deadline is `started + max_wall_s`."""
        limit = self._budget.max_wall_s
        self._deadline = None if limit is None or self._clock is None else started + limit
        self._refused = None

    def record(
        self, *, model_calls: int = 1, input_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        """Add one model call's (or several calls') usage."""
        self._calls += model_calls
        self._input += input_tokens
        self._output += output_tokens

    @property
    def totals(self) -> UsageTotals:
        return UsageTotals(self._calls, self._input, self._output)

    @property
    def refused(self) -> StopReason | None:
        """Why the first refused `can_call()` of this run said no (None: nothing refused)."""
        return self._refused

    def can_call(self) -> bool:
        """False once the model-call or token budget is reached or the deadline has passed.

        A refusal is remembered (see `refused`).
        """
        reason = self.limit_reached()
        if reason is not None and self._refused is None:
            self._refused = reason
        return reason is None

    def limit_reached(self) -> StopReason | None:
        """The limit that forbids another model call now (calls, tokens, then time), or None."""
        reason = self.exhausted(reached=True)
        deadline, clock = self._deadline, self._clock
        if reason is None and deadline is not None and clock is not None:
            return StopReason.TIME_BUDGET_EXHAUSTED if clock.monotonic() >= deadline else None
        return reason

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
