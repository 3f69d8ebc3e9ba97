"""An evaluation's dataset: its cases read from a JSONL or CSV file (`read_cases`).

`dataset_path` finds the file an evaluation names (CD800 when it is neither
JSONL nor CSV, or not there); `read_cases` reads each line or row into an
`EvalCase`, each one that is not a case a located problem (CD801, at its line):
not JSON, nested deeper than `--cases` reads, not an object of `name`, `inputs`
and `expected`, a CSV header naming a column twice or a column `input.` or
`expected.` with no name after the dot, a row of more or fewer cells
than the header or a cell longer than csv reads, two cases of one name. A JSONL
line is `{"name": ..., "inputs": {...}, "expected": {...}}` (`name` optional:
`case-N`); a CSV file's columns are `name`, `input.X` and `expected.X`, each
cell read as JSON when it parses and as text otherwise.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._escapes import written
from converge_dsl._json_keys import DuplicateKey, unique_keys
from converge_dsl._json_text import loads
from converge_dsl._json_types import MAX_INPUT_DEPTH, JsonObject, JsonValue, nests_deeper
from converge_dsl.diagnostics import Diagnostic, Severity, did_you_mean

if TYPE_CHECKING:
    from collections.abc import Sequence

    from converge_dsl.batch import Pipeline

    from ._spec import _Reader


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One dataset case: a name, the pipeline's inputs and the expected values."""

    name: str
    inputs: JsonObject
    expected: JsonObject
    line: int


def dataset_path(reader: _Reader, named: str) -> Path | None:
    if not named.endswith((".jsonl", ".csv")):
        reader.problem(
            codes.EVAL_DATASET_MISSING,
            f"dataset {named!r} is neither JSONL nor CSV",
            ("dataset",),
            "name a .jsonl file (one case a line) or a .csv file (name, input.X, expected.X)",
        )
        return None
    before = len(reader.problems)
    found = reader.file(named, ("dataset",), "dataset")
    if found is None and len(reader.problems) > before:
        last = reader.problems[-1]
        if last.code == codes.TEST_FILE_MISSING:
            reader.problems[-1] = recode(last, codes.EVAL_DATASET_MISSING)
    return found


def recode(diagnostic: Diagnostic, code: str) -> Diagnostic:
    fields = {name: getattr(diagnostic, name) for name in diagnostic._fields}
    return Diagnostic(**{**fields, "code": code})


def read_cases(
    reader: _Reader, dataset: Path, display: str, pipeline: Pipeline | None = None
) -> tuple[EvalCase, ...]:
    """The dataset's cases, each line or row that is not one a problem of `reader`; with
    a `pipeline`, each input its cases give that it does not declare too (CD802, once
    at its first use: every case's run would be refused alike)."""
    from converge_dsl._reading import ReadRefused, read_bytes

    try:
        text = read_bytes(dataset, "dataset").decode("utf-8-sig")
    except (OSError, UnicodeDecodeError, ReadRefused) as exc:
        reader.problem(codes.EVAL_BAD_CASE, f"dataset cannot be read: {exc}", ("dataset",), None)
        return ()
    rows = _jsonl_rows(text) if dataset.suffix == ".jsonl" else _csv_rows(text)
    out: list[EvalCase] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        problem = _row_problem(row)
        if problem is None and isinstance(row, dict):
            name = str(row.get("name") or f"case-{len(out) + 1}")
            if name in seen:
                problem = f"two cases are named {name!r} (the first on line {seen[name]})"
            else:
                seen[name] = line
                out.append(EvalCase(name, row.get("inputs", {}), row.get("expected", {}), line))
                continue
        reader.problems.append(
            Diagnostic(
                codes.EVAL_BAD_CASE,
                Severity.ERROR,
                str(problem),
                display,
                line,
                1,
                line,
                1,
                (),
                _CSV_ROW if dataset.suffix == ".csv" else _JSONL_LINE,
                False,
            )
        )
    if pipeline is not None:
        csv_file = dataset.suffix == ".csv"
        _check_inputs(
            reader, text=text, csv_file=csv_file, display=display, cases=out, pipeline=pipeline
        )
    return tuple(out)


def _check_inputs(
    reader: _Reader,
    *,
    text: str,
    csv_file: bool,
    display: str,
    cases: Sequence[EvalCase],
    pipeline: Pipeline,
) -> None:
    """A CD802 for each input of `cases` that `pipeline` does not declare, located at its
    first use: the key in its JSONL line, the `input.X` column of a CSV header (the one
    check of `run --cases` too, `converge_dsl.batch.undeclared_inputs`).

    A case expecting `stop_reason: usage_error` (`refused`) may give such an input on
    purpose, unless it is a likely typo of a declared one: a typo is never meant."""
    from converge_dsl._files import jsonl_lines
    from converge_dsl.batch import key_at, undeclared_inputs

    declared = pipeline.inputs
    typo: dict[str, bool] = {}  # by undeclared name: whether it is a likely typo (once each)

    def meant(case: EvalCase, name: str) -> bool:
        """Whether `case` gives the undeclared input `name` on purpose."""
        if name in declared or not refused(case):
            return False
        if name not in typo:
            typo[name] = bool(did_you_mean(name, declared))
        return not typo[name]

    lines: list[str] = []  # read once there is an input to place
    cells: dict[str, tuple[int, int]] = {}

    def place(case: EvalCase, name: str) -> tuple[str, int, int, int]:
        if not lines:
            lines.extend(jsonl_lines(text) or [""])
            cells.update(_header_cells(lines[0]) if csv_file else {})
        line = 1 if csv_file else case.line
        if csv_file:
            start, end = cells.get(f"input.{name}", (-1, -1))
        else:
            start, end = key_at(lines[line - 1] if line <= len(lines) else "", ("inputs", name))
        return (display, line, *((start + 1, end + 1) if start >= 0 else (1, 1)))

    given = ((case, name) for case in cases for name in case.inputs if not meant(case, name))
    reader.problems.extend(
        undeclared_inputs(
            pipeline.name,
            declared,
            given,
            label=lambda case: f"'{written(case.name)}'",
            place=place,
        )
    )


def refused(case: EvalCase) -> bool:
    """Whether `case` expects its run to be refused (`"expected": {"stop_reason":
    "usage_error"}`): its inputs may be ones the pipeline does not declare."""
    return case.expected.get("stop_reason") == "usage_error"


def _header_cells(header: str) -> dict[str, tuple[int, int]]:
    """Where each cell of the CSV `header` line begins and ends, its quotes included, by
    the column it reads (the first cell of a column read twice)."""
    cells: dict[str, tuple[int, int]] = {}
    at = 0
    while at <= len(header):
        start = at
        if header[at : at + 1] == '"':
            at += 1
            while at < len(header) and (header[at] != '"' or header[at + 1 : at + 2] == '"'):
                at += 2 if header[at] == '"' else 1
            at += 1  # past the closing quote
        at = header.find(",", at)
        end = len(header) if at < 0 else at
        read = next(csv.reader([header[start:end]]), None) or [""]
        cells.setdefault(read[0], (start, end))
        if at < 0:
            break
        at += 1
    return cells


_JSONL_LINE = 'a case is {"name": ..., "inputs": {...}, "expected": {...}}'
_CSV_ROW = "a case is a row with a cell for each column of the header: name, input.X, expected.X"


def _row_problem(row: object) -> str | None:
    if isinstance(row, str):
        return row
    if not isinstance(row, dict):
        return "a case must be a JSON object"
    extra = sorted(set(row) - {"name", "inputs", "expected"})
    if extra:
        return f"a case has no field {extra[0]!r}"
    for part in ("inputs", "expected"):
        if not isinstance(row.get(part, {}), dict):
            return f"a case's {part!r} must be an object"
    return None


def _jsonl_rows(text: str) -> list[tuple[int, object]]:
    from converge_dsl._files import jsonl_lines

    rows: list[tuple[int, object]] = []
    for number, line in enumerate(jsonl_lines(text), 1):
        if not line.strip():
            continue
        too_deep = f"line {number} nests deeper than {MAX_INPUT_DEPTH} levels"  # as --cases
        try:
            value = loads(line, object_pairs_hook=unique_keys)
            rows.append((number, too_deep if nests_deeper(value, line, MAX_INPUT_DEPTH) else value))
        except RecursionError:
            rows.append((number, too_deep))
        except DuplicateKey as exc:  # as --cases and the run's other JSON inputs
            rows.append((number, f"line {number}: {exc}"))
        except ValueError as exc:
            rows.append((number, f"line {number} is not JSON: {exc}"))
    return rows


def _csv_rows(text: str) -> list[tuple[int, object]]:
    # strict: a quoted cell never closed was read to the end of the file as one cell
    reader = csv.DictReader(io.StringIO(text), strict=True)
    lines = io.StringIO(text).readlines()  # as the reader counts them
    rows: list[tuple[int, object]] = []
    start = 1  # the line the row being read begins at
    try:
        columns = reader.fieldnames or ()
        blank = next((c for c in columns if not c.strip()), None)
        if blank is not None:  # Excel's trailing empty columns: refused before "twice"
            return [(1, f"column {blank!r} is neither name, input.X nor expected.X")]
        unnamed = next((c for c in columns if c in ("input.", "expected.")), None)
        if unnamed is not None:  # read as an input or expected value named ''
            return [(1, f"column {unnamed!r} gives no name after the dot ({unnamed}X)")]
        twice = _repeated(columns)
        if twice is not None:  # the row's dict keeps the last cell of the two, silently
            return [(1, f"the header names column {twice!r} twice")]
        while True:
            start = reader.line_num + 1
            while start <= len(lines) and not lines[start - 1].strip():
                start += 1  # the reader skips blank lines
            row = next(reader, None)
            if row is None:
                break
            rows.append((reader.line_num, _csv_case(row)))
    except csv.Error as exc:  # a cell over csv's field limit: it reads no further
        unread = f"the CSV cannot be read from here: {exc}"
        if "end of data" in str(exc):
            unread += " (a quoted cell is never closed)"
        if "field limit" in str(exc):
            unread = (
                f"a cell is longer than {csv.field_size_limit():,} characters, the most a "
                "CSV cell is read with; give long inputs in a JSONL dataset"
            )
        rows.append((start, unread))
    return rows


def _repeated(columns: Sequence[str]) -> str | None:
    """The first column the header names a second time (as a JSONL line's key: refused)."""
    seen: set[str] = set()
    for column in columns:
        if column in seen:
            return column
        seen.add(column)
    return None


def _csv_case(row: dict[Any, Any]) -> object:
    """The case a CSV row gives, or what is wrong with it."""
    case: dict[str, JsonValue] = {}
    inputs: dict[str, JsonValue] = {}
    expected: dict[str, JsonValue] = {}
    problem = None
    for column, cell in row.items():
        if column is None or cell is None:
            problem = "a row has more or fewer cells than the header"
            continue
        value = _cell(cell)
        if column == "name":
            case["name"] = cell
        elif column.startswith("input."):
            inputs[column.removeprefix("input.")] = value
        elif column.startswith("expected."):
            expected[column.removeprefix("expected.")] = value
        else:
            problem = f"column {column!r} is neither name, input.X nor expected.X"
    case.update(inputs=inputs, expected=expected)
    return problem or case


def _cell(cell: str) -> JsonValue:
    try:
        value: JsonValue = loads(cell)
    except (ValueError, RecursionError):  # text, or nested past what JSON is read to
        return cell
    return value
