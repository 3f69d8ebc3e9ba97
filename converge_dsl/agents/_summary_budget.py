"""`SummaryBudget`: the limits of an agent's span summarizer, and their arithmetic.

Pure arithmetic with no imports, so the validate stage's agent checks can show
a budget that never lets the summarizer run (`never_calls`) without loading
the turn loop, the engine or the models (docs/architecture.md §9).
`converge_dsl.agents._policy` re-exports it for the turn loop and `plan`.
"""

from __future__ import annotations

from converge_dsl._record import Record


class SummaryBudget(Record):
    _fields = (
        "max_calls",
        "max_input_chars",
        "timeout_s",
        "expected_summary_bytes",
        "cost_floor_multiple",
    )
    __slots__ = _fields

    def __init__(
        self,
        max_calls: int,
        max_input_chars: int,
        timeout_s: float,
        expected_summary_bytes: int,
        cost_floor_multiple: float,
    ) -> None:
        self.max_calls = max_calls
        self.max_input_chars = max_input_chars
        self.timeout_s = timeout_s
        self.expected_summary_bytes = expected_summary_bytes
        self.cost_floor_multiple = cost_floor_multiple

    @property
    def floor_chars(self) -> float:
        return self.expected_summary_bytes * self.cost_floor_multiple

    def refusal(self, calls_made: int, chars: int) -> str | None:
        """Why a span of `chars` gets the stub without a call, or None if a call fits."""
        if calls_made >= self.max_calls:
            return "budget_exhausted"
        if chars > self.max_input_chars:
            return "over_budget"
        if chars < self.floor_chars:
            return "below_floor"
        return None

    def never_calls(self) -> str | None:
        """The arithmetic showing no span can ever be summarised, if that is so."""
        if self.max_calls <= 0:
            return f"max_calls is {self.max_calls}"
        if self.floor_chars > self.max_input_chars:
            return (
                f"expected_summary_bytes {self.expected_summary_bytes} x cost_floor_multiple "
                f"{self.cost_floor_multiple:g} = {self.floor_chars:g} > max_input_chars "
                f"{self.max_input_chars}"
            )
        return None
