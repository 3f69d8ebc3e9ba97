"""A cap on how many diagnostics of one code are shown; the rest are counted.

A file with 450,000 unknown keys has 450,000 findings, and printing them all
helps nobody (and once took 185 MB of JSON). `cap(diagnostics)` keeps the
first `MAX_PER_CODE` of each code in the order given (best first) and turns
the rest of each code into one `Omitted` record: how many, of which code and
severity, and the first one left out (where the omitted run starts). Every
renderer prints the records after the kept diagnostics: human text as
`... and 449,900 more CD100 errors`, JSON and SARIF as an entry with an
`omitted` count.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from converge_dsl.diagnostics import Diagnostic

MAX_PER_CODE = 100


class Omitted:
    """`count` diagnostics of `first.code` not shown; `first` is the first of them."""

    __slots__ = ("count", "first", "shown")

    def __init__(self, first: Diagnostic, count: int, shown: int = MAX_PER_CODE) -> None:
        self.first = first
        self.count = count
        self.shown = shown

    @property
    def code(self) -> str:
        return self.first.code

    @property
    def message(self) -> str:
        """`... and 449,900 more CD100 errors (...)`: the words every renderer prints."""
        kind = self.first.severity.value + ("" if self.count == 1 else "s")
        return (
            f"... and {self.count:,} more {self.code} {kind} "
            f"(only the first {self.shown} of a code are shown)"
        )

    def as_json(self) -> dict[str, object]:
        """The first omitted diagnostic's JSON, worded as the count, plus `omitted`."""
        return {
            **self.first.as_json(),
            "message": self.message,
            "hint": "fix the ones shown and validate again",
            "omitted": self.count,
        }


def cap(
    diagnostics: Iterable[Diagnostic], per_code: int = MAX_PER_CODE
) -> tuple[list[Diagnostic], list[Omitted]]:
    """The first `per_code` diagnostics of each code (order kept), and the rest as counts.

    Omitted records come in the order their codes first appear.
    """
    kept: list[Diagnostic] = []
    seen: dict[str, int] = {}
    first: dict[str, Diagnostic] = {}
    for diagnostic in diagnostics:
        code = diagnostic.code
        count = seen.get(code, 0) + 1
        seen[code] = count
        if count <= per_code:
            kept.append(diagnostic)
        elif count == per_code + 1:
            first[code] = diagnostic
    omitted = [Omitted(d, seen[code] - per_code, per_code) for code, d in first.items()]
    return kept, omitted


def omitted_count(omitted: Sequence[Omitted]) -> int:
    return sum(o.count for o in omitted)
