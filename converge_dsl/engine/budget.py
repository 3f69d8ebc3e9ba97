"""Budgets, the usage meter, and the reasons a run stops.

`Budget` bounds a run. `UsageMeter` counts model calls and tokens: the engine
owns one (`Engine.usage`), LLM suggestors and agents record into it and ask
`can_call()` before calling a model; the engine checks it after each merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class StopReason(StrEnum):
    """Why a run stopped (DESIGN §1.1, plus `model_call_budget_exhausted`)."""

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
    """Counts model calls and tokens against a `Budget`."""

    __slots__ = ("_budget", "_calls", "_input", "_output")

    def __init__(self, budget: Budget, start: UsageTotals | None = None) -> None:
        self._budget = budget
        self._calls = self._input = self._output = 0
        self._restore(start or UsageTotals())

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

    def can_call(self) -> bool:
        """False once the model-call or token budget is reached."""
        return self.exhausted(reached=True) is None

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

    def _restore(self, totals: UsageTotals) -> None:
        self._calls = totals.model_calls
        self._input = totals.input_tokens
        self._output = totals.output_tokens
