"""`run --cases`: an input the pipeline does not declare is refused before any case runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.batch import key_at
from converge_dsl.cli import run as cli

from .conftest import ECHO, expected


def _batch(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str, Path]:
    """Run the echo pipeline over the cases `text` from `tmp_path` (so the file is shown
    as `cases.jsonl`); the exit code, standard output and error, and `--out`."""
    import os

    (tmp_path / "cases.jsonl").write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        argv = ["run", str(ECHO), "--cases", "cases.jsonl", "--out", "r.jsonl", *args]
        code = cli(argv, out, err)
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue(), tmp_path / "r.jsonl"


_CASES = (
    '{"id": "a", "word": "tea"}\n'
    '{"id": "b", "wrod": "milk"}\n'
    "not json\n"
    '{"lang": "en", "wrod": "oat"}\n'
    '{"id": "c", "word": "x", "expected": {"stop_reason": "usage_error"}}\n'
)


def test_an_undeclared_input_is_one_located_error_with_a_guess(tmp_path: Path) -> None:
    # Each case giving 'wrod' ran and failed alone at run time ("CD338: unknown input
    # 'wrod'"), one result line a case; the others ran. Now the batch is refused as an
    # evaluation's dataset is (CD802, each input once, at its first use), exit 3. A
    # cases line has no `expected`: every key but `id` is an input, so a refusal
    # cannot be opted in to, and `expected` is an undeclared input like any other.
    code, out, err, results = _batch(tmp_path, _CASES)
    assert (code, out) == (3, "")
    assert err == expected("undeclared-input.txt", err)
    assert not results.exists()


def test_an_undeclared_input_and_its_case_are_quoted_as_every_message_quotes(
    tmp_path: Path,
) -> None:
    """CD802 quotes the input and the case's id with `written`, as CD250 and CD272 do (a
    quote escaped, a hidden character and a no-break space too), not with Python's repr."""
    given = '{"id": "it\'s\\u00a0", "w\'rod\\u202e": "a"}\n'
    code, out, _, _ = _batch(tmp_path, given, "--format", "json")
    assert code == 3
    (found,) = json.loads(out)
    assert found["message"] == (
        "pipeline 'echo' has no input 'w\\x27rod\\u202e', given by case 'it\\x27s\\xa0'"
    )


@pytest.mark.parametrize("executor", ["local", "process"])
def test_nothing_runs_when_a_case_gives_an_undeclared_input(tmp_path: Path, executor: str) -> None:
    # A case that runs writes its trace (traces/<index>.jsonl) and its result line.
    given = '{"word": "a"}\n{"wrod": "b"}\n'
    args = ("--executor", executor, "--trace", "traces", "--format", "json")
    code, out, _, results = _batch(tmp_path, given, *args)
    assert code == 3
    assert [d["code"] for d in json.loads(out)] == ["CD802"]
    traces = tmp_path / "traces"
    assert (results.exists(), sorted(traces.iterdir()) if traces.exists() else []) == (False, [])
    code, _, _, results = _batch(tmp_path, given.replace("wrod", "word"), *args)
    assert code == 0
    assert sorted(p.name for p in traces.iterdir()) == ["0.jsonl", "1.jsonl"]


def test_only_the_cases_left_to_run_are_checked(tmp_path: Path) -> None:
    # --resume: a case the results file already holds is not run again, so not checked.
    code, _, _, results = _batch(tmp_path, '{"word": "a"}\n')
    assert code == 0
    lines = results.read_text(encoding="utf-8")
    code, _, err, _ = _batch(tmp_path, '{"wrod": "a"}\n{"word": "b"}\n', "--resume")
    assert code == 0, err
    assert results.read_text(encoding="utf-8").startswith(lines)


def test_a_refused_resume_leaves_a_torn_last_line_of_out_as_it_was(tmp_path: Path) -> None:
    # The torn last line of `--out` (a batch killed while writing it) was cut before the
    # cases were checked: the refusal said nothing ran, yet the file had changed.
    code, _, _, results = _batch(tmp_path, '{"word": "a"}\n')
    assert code == 0
    torn = results.read_bytes() + results.read_bytes()[:20]
    results.write_bytes(torn)
    code, _, err, _ = _batch(tmp_path, '{"word": "a"}\n{"wrod": "b"}\n', "--resume")
    assert code == 3
    assert "CD802" in err
    assert results.read_bytes() == torn
    code, _, err, _ = _batch(tmp_path, '{"word": "a"}\n{"word": "b"}\n', "--resume")
    assert code == 0, err
    assert results.read_bytes().startswith(torn[: torn.rindex(b"\n") + 1])
    assert results.read_bytes().count(b"\n") == 2


def test_a_case_that_cannot_be_read_stays_its_own_result(tmp_path: Path) -> None:
    # Not JSON, or a bad id: each is its case's usage_error line, as before.
    code, _, _, results = _batch(tmp_path, 'not json\n{"id": [1], "wrod": 1}\n{"word": "a"}\n')
    assert code == 1
    stops = sorted((line["index"], line["stop_reason"]) for line in map(json.loads, results.open()))
    assert stops == [(0, "usage_error"), (1, "usage_error"), (2, "converged")]


@pytest.mark.parametrize(
    ("line", "name", "found"),
    [
        ('{"inputs": {"a": 1, "b": 2}}', "b", '"b"'),
        ('{ "name" :"x" ,\t"inputs" :\t{ "a" : [1, {"b": 0}] ,\r"b"\t: 2 } }', "b", '"b"'),
        ('{"inputs": {"a\\u0062": 1, "ab": 2}}', "ab", '"a\\u0062"'),  # the first, escaped
        ('{"expected": {"b": 1}, "inputs": {"b": 2}}', "b", '"b"'),  # not `expected`'s
        ('{"inputs": {"a": 1}}', "b", None),
        ('{"inputs": [1]}', "b", None),
        ('{"inputs": {"a": 1}  ', "b", None),
    ],
)
def test_the_key_of_an_input_is_found_with_its_quotes(
    line: str, name: str, found: str | None
) -> None:
    """`key_at` finds where an eval dataset's JSONL line names an input (the caret of CD802)."""
    start, end = key_at(line, ("inputs", name))
    assert (line[start:end] if start >= 0 else None) == found


def test_run_cases_refuses_an_undeclared_input_before_any_case_runs(tmp_path: Path) -> None:
    # Before, `run_cases` (the API's batch on any executor) ran every case, each giving
    # such an input coming back as its own usage_error result; now it refuses them as
    # `run --cases` does, each input at the span of the first case giving it.
    from converge_dsl.batch import BatchOptions, Case, CasesRefused, run_cases
    from converge_dsl.diagnostics import SourceSpan

    options = BatchOptions(pipeline=ECHO, cases=ECHO, out=tmp_path / "unused")
    cases = [
        Case(0, "a", {"word": "tea"}),
        Case(1, "b", {"wrod": "milk"}, span=SourceSpan("mine.csv", 3, 1, 3, 5)),
        Case(2, "c", {"wrod": "oat"}),
        Case(3, "d", {"nope": 1}, problem="cannot run anyway"),  # its own result
    ]
    with pytest.raises(CasesRefused) as caught:
        list(run_cases(options, cases))
    found = [(d.message, d.file, d.line, d.column, d.end_column) for d in caught.value.diagnostics]
    assert found == [
        ("pipeline 'echo' has no input 'wrod', given by case 'b' and 1 more", "mine.csv", 3, 1, 5)
    ]
    kept = [cases[0], cases[3]]
    results = sorted(run_cases(options, kept), key=lambda r: r.index)  # as they finish
    assert [r.stop_reason for r in results] == ["converged", "usage_error"]


def test_an_api_case_giving_an_undeclared_input_is_placed_by_its_index_path(
    tmp_path: Path,
) -> None:
    # `Pipeline.run_many` over mappings: CD802 had no file, no line and the root for a
    # path; a case named by its id ('c') could not be found by its place in the list.
    import converge_dsl
    from converge_dsl.batch import BatchOptions, CasesRefused, read_cases, run_cases

    pipeline = converge_dsl.load(ECHO)
    with pytest.raises(CasesRefused) as caught:
        list(pipeline.run_many([{"word": "a"}, {"word": "b"}, {"id": "c", "topic": "x"}]))
    (found,) = [d.as_json() for d in caught.value.diagnostics]
    assert (found["file"], found["line"], found["path"]) == ("", 0, "cases[2].inputs.topic")
    assert found["message"] == "pipeline 'echo' has no input 'topic', given by case 'c'"
    # Cases read from a cases file keep its line (`run_cases`, as `run --cases`).
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"word": "a"}\n\n{"topic": "x"}\n', encoding="utf-8")
    options = BatchOptions(pipeline=ECHO, cases=cases, out=tmp_path / "unused")
    with pytest.raises(CasesRefused) as caught:
        list(run_cases(options, read_cases(cases)))
    (found,) = [d.as_json() for d in caught.value.diagnostics]
    assert (found["file"], found["line"], found["path"]) == (str(cases), 3, "<root>")
