"""A case's result: its line and document, made from the run's plain JSON values."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import converge_dsl
from converge_dsl.batch import CaseResult

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    path
    for path in (ROOT / "pipelines").glob("*.yaml")
    if not path.name.endswith((".script.yaml", ".test.yaml"))
)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_a_result_line_is_the_documents_line_without_a_model_per_fact(path: Path) -> None:
    pipeline = converge_dsl.load(path)
    outcome = asyncio.run(pipeline.outcome())
    document = outcome.document
    assert document.facts  # every example promotes facts
    quick = CaseResult(3, "c", outcome.plain, outcome.exit_code)
    modelled = CaseResult.of(3, "c", document, outcome.exit_code)
    assert quick.line() == modelled.line()  # byte for byte
    assert quick.document == document
    assert quick.stop_reason == document.stop_reason
    assert quick.usage == document.usage.model_dump()
    assert json.loads(quick.line())["index"] == 3


def test_a_case_that_is_not_standard_json_says_where() -> None:
    from converge_dsl.batch._cases import parse_case

    case = parse_case(3, '{"id": 7, "market": {"name": "Lyon\\udfff"}}')
    assert case.problem == (
        "case 3: not JSON (the text at /market/name holds a lone surrogate (U+DFFF), which "
        "is not Unicode text)"
    )
    assert parse_case(4, '{"market": NaN}').problem == "case 4: not JSON (NaN is not standard JSON)"


def test_a_case_giving_a_key_twice_is_refused_as_the_runs_other_inputs_are() -> None:
    """`{"market": "a", "market": "b"}` ran with "b" (the last kept silently), where
    `--inputs`, `--input` and a request body refuse any repeat."""
    from converge_dsl.batch._cases import parse_case

    for text in ('{"market": "a", "market": "b"}', '{"market": {"n": 1, "n": 1}}'):
        problem = parse_case(2, text).problem
        assert problem is not None
        assert problem.startswith("case 2: the key ")
        assert problem.endswith(" is given twice in one object")
    assert parse_case(2, '{"market": [{"n": 1}, {"n": 1}]}').problem is None


def test_a_case_nested_deeper_than_inputs_may_says_so_in_its_own_words() -> None:
    # Before, 50,000 brackets said "not JSON (maximum recursion depth exceeded while
    # decoding a JSON array from a unicode string)", and 70 ran.
    from converge_dsl._json_types import MAX_INPUT_DEPTH
    from converge_dsl.batch._cases import parse_case

    def nested(depth: int) -> str:
        return '{"market": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"

    too_deep = f"case 1: its inputs nest deeper than {MAX_INPUT_DEPTH} levels"
    assert parse_case(1, nested(50_000)).problem == too_deep
    assert parse_case(1, nested(MAX_INPUT_DEPTH + 1)).problem == too_deep
    assert parse_case(1, nested(MAX_INPUT_DEPTH)).problem is None


def test_a_result_line_is_the_json_dumps_of_its_body_byte_for_byte() -> None:
    body = {"stop_reason": "converged", "facts": {"é": [{"x": 0.1, "y": 1e16, "z": "\x00€"}]}}
    line = CaseResult(2, "c", body, 0).line()
    expected = {"index": 2, "id": "c", "exit_code": 0, **body}
    assert line == json.dumps(expected, ensure_ascii=False, separators=(",", ":")) + "\n"
    assert line.startswith('{"index":2,"id":"c","exit_code":0,"stop_reason":')


def test_a_cases_file_may_begin_with_a_byte_order_mark(tmp_path: Path) -> None:
    # A file saved by an editor that puts one first: its first case was not JSON
    # ("case 0: not JSON (...)"), the others ran.
    from converge_dsl.batch import read_cases

    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "word": "tea"}\n{"word": "milk"}\n')
    cases = read_cases(path)
    assert [(c.id, dict(c.inputs), c.problem) for c in cases] == [
        ("a", {"word": "tea"}, None),
        (None, {"word": "milk"}, None),
    ]
    assert cases[0].span is not None
    assert (cases[0].span.line, cases[0].span.end_column) == (
        1,
        len('{"id": "a", "word": "tea"}') + 1,
    )
