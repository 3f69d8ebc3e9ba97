"""Inputs that cases give and their pipeline does not declare, refused before any case runs.

`undeclared_inputs` makes the one located diagnostic (CD802, "did you mean") of each
such input, at its first use, for every caller that holds cases: `run --cases` and
the Python API's batches, `Pipeline.run_many` and `run_cases` (`check_cases`: a
usage error, `CasesRefused`, exit 3) and an evaluation's dataset
(`converge_dsl.pipetest`, which locates an input in its own way: a JSONL line's
`inputs` object, a CSV header's `input.X` column). Each case giving it would be
refused alike at its run. `key_at` finds a key in a JSONL line, where its caret goes.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

from converge_dsl import codes
from converge_dsl._escapes import written
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity, unknown_name_hint
from converge_dsl.errors import PipelineInvalid

if TYPE_CHECKING:
    from ._cases import Case

__all__ = ["CasesRefused", "key_at", "undeclared_inputs"]

C = TypeVar("C")
# Where an input is given: file, line, first column and the column past its end
# (1-based; column 1 and end 1: the line, the key not found on it).
Place = tuple[str, int, int, int]


class CasesRefused(PipelineInvalid):
    """`run --cases`, `Pipeline.run_many`, `run_cases`: cases that give inputs the
    pipeline does not declare, each input located (CD802, in `diagnostics`); a usage
    error (exit 3), raised before any case runs."""

    exit_code = 3
    code = codes.EVAL_UNKNOWN_NAME


def undeclared_inputs(
    pipeline: str,
    declared: Collection[str],
    given: Iterable[tuple[C, str]],
    *,
    label: Callable[[C], str],
    place: Callable[[C, str], Place],
    path: Callable[[C, str], JsonPath] | None = None,
) -> list[Diagnostic]:
    """A CD802 for each input name of `given` (case, name), in case order, that
    `declared` lacks: at its first use, naming that case (`label`) and how many more
    give it, placed by `place`, its JSON path by `path` (none: the root). Only those
    shown get a hint ("did you mean"): past the first `MAX_PER_CODE` of a code, a hint
    is never read."""
    from converge_dsl.frontend import MAX_PER_CODE

    first: dict[str, C] = {}
    count: collections.Counter[str] = collections.Counter()
    for case, name in given:
        if name not in declared:
            first.setdefault(name, case)
            count[name] += 1
    listed = ", ".join(declared) or "none"
    problems = []
    for index, (name, case) in enumerate(first.items()):
        file, line, column, end = place(case, name)
        more = f" and {count[name] - 1:,} more" if count[name] > 1 else ""
        shown = index < MAX_PER_CODE
        problems.append(
            Diagnostic(
                codes.EVAL_UNKNOWN_NAME,
                Severity.ERROR,
                f"pipeline '{written(pipeline)}' has no input '{written(name)}', given by case "
                f"{label(case)}{more}",
                file,
                line,
                column,
                line,
                end,
                () if path is None else path(case, name),
                unknown_name_hint(name, declared, f"declared inputs: {listed}") if shown else None,
            )
        )
    return problems


def check_cases(
    pipeline: str, declared: Collection[str], cases: Sequence[Case], text: str | None = None
) -> None:
    """Refuse (`CasesRefused`) the inputs `cases` give that the pipeline named `pipeline`
    does not declare (its `declared` inputs), each at its key on its line of the cases
    file, whose `text` the cases were read from (None: cases the API was given, each at
    its own `span` if it has one: `Pipeline.run_many`, `run_cases`; one without a span
    has its index path, `cases[3].inputs.topic`, for a place). A case that cannot run
    anyway (its `problem`) is not read."""
    from converge_dsl._files import jsonl_lines

    lines: list[str] = []

    def place(case: Case, name: str) -> Place:
        span = case.span
        if span is None:
            return ("", 0, 0, 0)
        if text is None:
            return (span.file, span.line, span.column, span.end_column)
        if not lines:
            lines.extend(jsonl_lines(text))
        start, end = key_at(lines[span.line - 1], (name,))
        return (span.file, span.line, *((start + 1, end + 1) if start >= 0 else (1, 1)))

    given = ((case, name) for case in cases if case.problem is None for name in case.inputs)

    def path(case: Case, name: str) -> JsonPath:
        return ("cases", case.index, "inputs", name) if case.span is None else ()

    problems = undeclared_inputs(
        pipeline, declared, given, label=lambda case: case.label, place=place, path=path
    )
    if problems:
        raise CasesRefused(problems)


# What JSON reads as whitespace between tokens (the line was read as JSON: nothing else is).
_JSON_BLANKS = frozenset(" \t\n\r")


def key_at(line: str, path: Sequence[str]) -> tuple[int, int]:
    """Where the key at `path` (a key of the line's object, then a key of that key's
    object...) of the JSONL `line` begins and ends, its quotes included ((-1, -1): not
    found)."""
    decoder = json.JSONDecoder()

    def skip(at: int) -> int:
        while line[at : at + 1] in _JSON_BLANKS:
            at += 1
        return at

    def members(at: int) -> Iterator[tuple[str, int, int, int]]:  # key, its span, its value
        at = skip(at)
        if line[at : at + 1] != "{":
            return
        at = skip(at + 1)
        while line[at : at + 1] == '"':
            key, after = decoder.raw_decode(line, at)
            value = skip(skip(after) + 1)  # past the colon
            yield key, at, after, value
            at = skip(decoder.raw_decode(line, value)[1])
            if line[at : at + 1] != ",":
                return
            at = skip(at + 1)

    def find(at: int, keys: Sequence[str]) -> tuple[int, int]:
        for key, start, end, value in members(at):
            if key == keys[0]:
                return (start, end) if len(keys) == 1 else find(value, keys[1:])
        return -1, -1

    try:
        return find(0, path)
    except (ValueError, RecursionError):  # the line was read as JSON: not expected
        return -1, -1
