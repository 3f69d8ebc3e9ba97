"""What changed between two batch results files: `read_batch_results` and `diff_batches`.

A batch results file (`converge-dsl run --cases CASES --out RESULTS.jsonl`)
holds one result line per case, in the order the cases finished: the case's
run result with its `index` and `id` first. Cases are matched by name: the
case's `id`, or `#INDEX` for a case given without one. For each case in both
files, the diff of its two run results (`diff_results`); then the cases only
in A and only in B, and the usage counts summed over the cases in both. The
text shows the facts of each case and the usage of the whole batch: a changed
prompt changes the tokens of every case, and those lines would hide the facts.
`ignore` leaves sections out of every case's comparison and of the sums, as
`diff_results` does: a case that differs only there is the same.

`read_batch_results(text, display)` reads a file's text; a line that is not a
result line (CD816) or that names a case an earlier line named (CD817) is a
located diagnostic, all of them raised together as `PipelineInvalid`. A last
line cut short (no newline, not JSON: a batch killed while writing it) is
left out, as `run --resume` leaves it out.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, Severity
from converge_dsl.errors import PipelineInvalid

from ._run_diff import Comparison, RunDiff, not_compared

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
    """The cases that differ (in A's order), how many are the same, the unmatched, and the
    usage counts, summed over the cases in both files, that differ."""

    cases: tuple[CaseDiff, ...]
    unchanged: int
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    usage: tuple[tuple[str, Any, Any], ...]
    ignored: tuple[str, ...] = ()  # the DIFF_SECTIONS left out of the comparison

    @property
    def same(self) -> bool:
        return not self.cases and not self.only_a and not self.only_b

    def as_json(self) -> dict[str, Any]:
        return {
            "same": self.same,
            "unchanged": self.unchanged,
            "cases": [{"case": c.case, **c.diff.compared_json()} for c in self.cases],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
            "usage": [{"what": w, "a": a, "b": b} for w, a, b in self.usage],
            "ignored": list(self.ignored),
        }

    def text(self) -> str:
        """Each case whose facts or stop reason differ, the unmatched cases, then the usage
        summed over the matched cases (a case whose usage alone differs is only counted)."""
        lines: list[str] = []
        for c in self.cases:
            if not c.diff.same_facts:
                lines.append(f"case {c.case}:")
                lines.extend("  " + line for line in c.diff.lines())
        lines.extend(f"only in A: {name}" for name in self.only_a)
        lines.extend(f"only in B: {name}" for name in self.only_b)
        matched = len(self.cases) + self.unchanged
        lines.extend(
            f"usage {w}, summed over the {matched} cases in both: {a} -> {b}"
            for w, a, b in self.usage
        )
        if not lines:
            left_out = f"; {not_compared(self.ignored)}" if self.ignored else ""
            return f"no difference ({self.unchanged} cases{left_out})\n"
        facts = sum(1 for c in self.cases if not c.diff.same_facts)
        if "usage" in self.ignored:  # no case differs in its usage only
            lines.append(f"{facts} of {matched} cases differ")
        else:
            lines.append(
                f"{facts} cases differ in their facts or stop reason, "
                f"{len(self.cases) - facts} in their usage only, {self.unchanged} not at all"
            )
        return "\n".join(lines) + "\n"


def is_batch_results(text: str) -> bool:
    """Whether `text` looks like a batch results file (its first line is a result line)."""
    return text.lstrip("\ufeff").startswith(RESULT_LINE_START)


def read_batch_results(text: str, display: str) -> tuple[CaseResultLine, ...]:
    """The cases of the results file `display` whose text is `text` (see the module docstring)."""
    found: list[CaseResultLine] = []
    seen: dict[str, int] = {}
    problems: list[Diagnostic] = []
    # "\n" only: a JSON string may hold U+2028 and the like, which splitlines() splits on
    raws = text.removeprefix("\ufeff").split("\n")
    for number, raw in enumerate(raws, start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError as exc:
            if number == len(raws):
                continue  # a last line without its newline: a batch killed while writing it
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


def diff_batches(
    a: Sequence[CaseResultLine], b: Sequence[CaseResultLine], ignore: Collection[str] = ()
) -> BatchDiff:
    """The difference from the cases of results file `a` to those of `b`, the `ignore`d
    sections (of `DIFF_SECTIONS`, checked once for all the cases) left out."""
    comparison = Comparison.leaving_out(ignore)
    after = {c.name: c for c in b}
    before = {c.name for c in a}
    changed: list[CaseDiff] = []
    unchanged = 0
    for case in a:
        other = after.get(case.name)
        if other is None:
            continue
        found = comparison.diff(case.body, other.body)
        if found.same:
            unchanged += 1
        else:
            changed.append(CaseDiff(case.name, found))
    matched = [(case.body, after[case.name].body) for case in a if case.name in after]
    return BatchDiff(
        tuple(changed),
        unchanged,
        tuple(c.name for c in a if c.name not in after),
        tuple(c.name for c in b if c.name not in before),
        () if "usage" in comparison.ignored else _usage_totals(matched),
        comparison.ignored,
    )


def _usage_totals(
    pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]],
) -> tuple[tuple[str, Any, Any], ...]:
    """Each numeric usage count summed over A's and over B's results, where the sums differ."""
    totals_a: dict[str, float] = {}
    totals_b: dict[str, float] = {}
    for body_a, body_b in pairs:
        for body, totals in ((body_a, totals_a), (body_b, totals_b)):
            for name, value in (body.get("usage") or {}).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    totals[name] = totals.get(name, 0) + value
    return tuple(
        (name, totals_a.get(name, 0), totals_b.get(name, 0))
        for name in sorted(totals_a.keys() | totals_b.keys())
        if totals_a.get(name, 0) != totals_b.get(name, 0)
    )
