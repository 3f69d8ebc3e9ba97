"""`SummaryBudget`: the limits of an agent's span summarizer, and their arithmetic.

Pure arithmetic with no imports, so the validate stage's agent checks can show
a budget that never lets the summarizer run (`never_calls`) without loading
the turn loop, the engine or the models (docs/architecture.md §9).
`converge_dsl.agents._policy` re-exports it for the turn loop and `plan`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._record import Record

if TYPE_CHECKING:
    from decimal import Decimal


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
        """Why a span of `chars` gets the stub without a call, or None if a call fits. The
        floor is compared exactly (`_exact_floor`), as `never_calls` does: what validate
        accepts the run accepts (100 x 0.07 is 7, not the float 7.000000000000001)."""
        if calls_made >= self.max_calls:
            return "budget_exhausted"
        if chars > self.max_input_chars:
            return "over_budget"
        floor = self._exact_floor()
        if floor is None or chars < floor:
            return "below_floor"
        return None

    def never_calls(self) -> str | None:
        """The arithmetic showing no span can ever be summarised, if that is so: exact, so a
        number near the 64-bit limit is shown as written, digit for digit."""
        if self.max_calls <= 0:
            return f"max_calls is {self.max_calls}"
        floor = self._exact_floor()
        if floor is None or floor > self.max_input_chars:
            return (
                f"expected_summary_bytes {self.expected_summary_bytes} x cost_floor_multiple "
                f"{self.multiple_text} = {self.floor_text} > max_input_chars "
                f"{self.max_input_chars}"
            )
        return None

    @property
    def multiple_text(self) -> str:
        """`cost_floor_multiple` as written (`4`, `1.5`, `1.0000001`, `1e+308`), in the
        form of `floor_text`."""
        written = self._written_multiple()
        return _shown(written) if written.is_finite() else str(self.cost_floor_multiple)

    @property
    def floor_text(self) -> str:
        """`floor_chars`, exactly (`9223372036854775807`, `2.5`, `9.223372036854775807e+326`)."""
        floor = self._exact_floor()
        return format(self.floor_chars, "g") if floor is None else _shown(floor)

    def _written_multiple(self) -> Decimal:
        """The multiple as its shortest text, which is what was written."""
        from decimal import Decimal

        multiple = self.cost_floor_multiple
        return Decimal(multiple if isinstance(multiple, int) else repr(multiple))

    def _exact_floor(self) -> Decimal | None:
        """expected_summary_bytes x cost_floor_multiple in exact decimal arithmetic (the
        multiple as written); None if not finite. What validate and the run both compare."""
        from decimal import Decimal, localcontext

        written = self._written_multiple()
        if not written.is_finite():
            return None
        with localcontext() as exact:
            exact.prec = 100  # 19 digits times 17: every product is exact
            return Decimal(self.expected_summary_bytes) * written


def _shown(number: Decimal) -> str:
    """`number` as plain decimal digits (`1600`, `0.07`), or in e-notation past 40 digits
    or 6 leading zeros (`1e+308`, `9.223372036854775807e+326`): one form for every number
    of the message."""
    number = number.normalize()
    return format(number, "f") if -7 < number.adjusted() < 40 else format(number, "e")
