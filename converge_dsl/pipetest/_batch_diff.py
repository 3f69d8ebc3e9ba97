"""What changed between two batch results files: `read_batch_results` and `diff_batches`.

A batch results file (`converge-dsl run --cases CASES --out RESULTS.jsonl`)
holds one result line per case, in the order the cases finished: the case's
run result with its `index` and `id` first. Cases are matched by name: the
case's `id`, or `#INDEX` for a case given without one. For each case in both
files, the fact diff of its two run results (`diff_results`); then the cases
only in A and only in B.

`read_batch_results(text, display)` reads a file's text; a line that is not a
result line (CD816) or that names a case an earlier line named (CD817) is a
located diagnostic, all of them raised together as `PipelineInvalid`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, Severity
from converge_dsl.errors import PipelineInvalid

from ._run_diff import RunDiff, diff_results

# The first bytes of every line a batch run writes (converge_dsl.batch's LINE_START).
RESULT_LINE_START = '{"index":'


@dataclass(frozen=True, slots=True)
class CaseResultLine:
    """One case of a results file: its name, its line and its run result."""

    name: str
    index: int
    line: int
    body: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class CaseDiff:
    case: str
    diff: RunDiff


@dataclass(frozen=True, slots=True)
class BatchDiff:
    """The cases that differ (in A's order), how many are the same, and the unmatched."""

    cases: tuple[CaseDiff, ...]
    unchanged: int
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]

    @property
    def same(self) -> bool:
        return not self.cases and not self.only_a and not self.only_b

    def as_json(self) -> dict[str, Any]:
        return {
            "same": self.same,
            "unchanged": self.unchanged,
            "cases": [{"case": c.case, **c.diff.as_json()} for c in self.cases],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
        }

    def text(self) -> str:
        lines: list[str] = []
        for c in self.cases:
            lines.append(f"case {c.case}:")
            lines.extend("  " + line for line in c.diff.text().splitlines())
        lines.extend(f"only in A: {name}" for name in self.only_a)
        lines.extend(f"only in B: {name}" for name in self.only_b)
        if not lines:
            return f"no difference ({self.unchanged} cases)\n"
        lines.append(f"{len(self.cases)} cases differ, {self.unchanged} the same")
        return "\n".join(lines) + "\n"


def is_batch_results(text: str) -> bool:
    """Whether `text` looks like a batch results file (its first line is a result line)."""
    return text.lstrip("\ufeff").startswith(RESULT_LINE_START)


def read_batch_results(text: str, display: str) -> tuple[CaseResultLine, ...]:
    """The cases of the results file `display` whose text is `text` (see the module docstring)."""
    found: list[CaseResultLine] = []
    seen: dict[str, int] = {}
    problems: list[Diagnostic] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError as exc:
            column = getattr(exc, "colno", 1)
            problems.append(_bad_line(display, number, column, f"line {number} is not JSON"))
            continue
        if (
            not isinstance(line, dict)
            or type(line.get("index")) is not int
            or not isinstance(line.get("facts"), dict)
        ):
            message = f"line {number} is not the result line of a case"
            problems.append(_bad_line(display, number, 1, message))
            continue
        case_id = line.get("id")
        name = f"#{line['index']}" if case_id is None else str(case_id)
        if name in seen:
            problems.append(
                Diagnostic(
                    codes.DIFF_DUPLICATE_CASE,
                    Severity.ERROR,
                    f"case {name!r} is on two lines (the first is line {seen[name]})",
                    display,
                    number,
                    1,
                    number,
                    1,
                    (),
                    "cases are matched by id: give each case of the cases file its own id",
                    False,
                )
            )
            continue
        seen[name] = number
        found.append(CaseResultLine(name, line["index"], number, line))
    if problems:
        raise PipelineInvalid(problems)
    return tuple(sorted(found, key=lambda c: (c.index, c.line)))


def _bad_line(display: str, number: int, column: int, message: str) -> Diagnostic:
    return Diagnostic(
        codes.DIFF_BAD_RESULT_LINE,
        Severity.ERROR,
        message,
        display,
        number,
        column,
        number,
        column,
        (),
        "give the results file a batch run wrote (run --cases CASES --out RESULTS.jsonl)",
        False,  # a result line is a whole run result: too long to quote
    )


def diff_batches(a: Sequence[CaseResultLine], b: Sequence[CaseResultLine]) -> BatchDiff:
    """The difference from the cases of results file `a` to those of `b`."""
    after = {c.name: c for c in b}
    before = {c.name for c in a}
    changed: list[CaseDiff] = []
    unchanged = 0
    for case in a:
        other = after.get(case.name)
        if other is None:
            continue
        found = diff_results(case.body, other.body)
        if found.same:
            unchanged += 1
        else:
            changed.append(CaseDiff(case.name, found))
    return BatchDiff(
        tuple(changed),
        unchanged,
        tuple(c.name for c in a if c.name not in after),
        tuple(c.name for c in b if c.name not in before),
    )
