"""`converge-dsl diff` of two batch results files: cases matched by id, located errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.errors import PipelineInvalid
from converge_dsl.pipetest import diff_batches, read_batch_results
from converge_dsl.pipetest._run_diff import Comparison

from .conftest import cli, expected


def _line(index: int, case_id: Any, urgency: int, tokens: int = 10) -> str:
    fact = {"id": "ticket", "content": f"urgency {urgency}", "data": {"urgency": urgency}}
    body = {
        "index": index,
        "id": case_id,
        "exit_code": 0,
        "stop_reason": "converged",
        "facts": {"tickets": [fact]},
        "usage": {"model_calls": 1, "input_tokens": tokens, "output_tokens": 5},
    }
    return json.dumps(body, separators=(",", ":"))


def _file(folder: Path, name: str, lines: list[str]) -> Path:
    path = folder / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_cases_are_matched_by_id_whatever_order_they_finished_in() -> None:
    a = read_batch_results("\n".join([_line(1, "y", 2), _line(0, "x", 1)]), "a.jsonl")
    b = read_batch_results("\n".join([_line(0, "x", 1), _line(1, "y", 3)]), "b.jsonl")
    found = diff_batches(a, b)
    assert [c.case for c in found.cases] == ["y"]
    assert found.cases[0].diff.facts[0].fields[-1] == ("/data/urgency", 2, 3)
    assert found.unchanged == 1
    assert (found.only_a, found.only_b, found.usage) == ((), (), ())
    assert not found.same


def test_a_case_without_an_id_is_named_by_its_index() -> None:
    a = read_batch_results(_line(0, None, 1) + "\n" + _line(1, None, 1), "a.jsonl")
    b = read_batch_results(_line(0, None, 1), "b.jsonl")
    found = diff_batches(a, b)
    assert found.only_a == ("#1",)
    assert found.unchanged == 1


def test_the_text_shows_facts_by_case_the_unmatched_and_the_summed_usage(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.jsonl", [_line(0, "x", 1), _line(1, "y", 2), _line(2, "gone", 1)])
    b = _file(
        tmp_path, "b.jsonl", [_line(0, "x", 1, tokens=12), _line(1, "y", 3), _line(3, "new", 1)]
    )
    code, out, _ = cli("diff", a, b)
    assert code == 1
    assert out == (
        "case y:\n"
        "  ~ tickets/ticket\n"
        '      content: "urgency 2" -> "urgency 3"\n'
        "      /data/urgency: 2 -> 3\n"
        "only in A: gone\n"
        "only in B: new\n"
        "usage input_tokens, summed over the 2 cases in both: 20 -> 22\n"
        "1 cases differ in their facts or stop reason, 1 in their usage only, 0 not at all\n"
    )
    code, out, _ = cli("diff", a, b, "--format", "json")
    found = json.loads(out)
    assert [c["case"] for c in found["cases"]] == ["x", "y"]
    assert (found["only_a"], found["only_b"]) == (["gone"], ["new"])
    assert found["usage"] == [{"what": "input_tokens", "a": 20, "b": 22}]
    assert cli("diff", a, a) == (0, "no difference (3 cases)\n", "")


def test_a_line_that_is_not_a_result_line_is_located(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.jsonl", [_line(0, "x", 1), '{"index": 1, "facts": {"k": [}', "[1]"])
    b = _file(tmp_path, "b.jsonl", [_line(0, "x", 1)])
    code, out, err = cli("diff", a, b)
    assert code == 2
    assert out == ""
    text = err.replace(str(tmp_path), "TMP")
    assert text == expected("diff-bad-results-line.txt", text)


def test_two_lines_of_one_case_are_refused_with_both_lines(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.jsonl", [_line(0, "x", 1), _line(1, "y", 1), _line(2, "x", 1)])
    with pytest.raises(PipelineInvalid) as caught:
        read_batch_results(a.read_text(), "a.jsonl")
    (problem,) = caught.value.diagnostics
    assert (problem.code, problem.line) == ("CD817", 3)
    assert problem.message == "case 'x' is on two lines (the first is line 1)"
    code, out, _ = cli("diff", a, a, "--format", "json")
    assert code == 2
    assert [d["code"] for d in json.loads(out)] == ["CD817", "CD817"]  # in A and in B


def test_a_results_file_and_a_run_result_are_not_compared(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.jsonl", [_line(0, "x", 1)])
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"stop_reason": "converged", "facts": {}}))
    code, _, err = cli("diff", a, b)
    assert code == 3
    assert "is a batch results file and the other a run result" in err


def test_html_goes_to_the_output_file(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.jsonl", [_line(0, "x", 1)])
    b = _file(tmp_path, "b.jsonl", [_line(0, "x", 2)])
    page = tmp_path / "diff.html"
    assert cli("diff", a, b, "--format", "html", "-o", page) == (1, "", "")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html><!-- converge-dsl diff page -->")
    assert '"kind":"batch"' in text


def test_a_last_line_cut_short_by_a_kill_is_left_out() -> None:
    text = _line(0, "x", 1) + "\n" + _line(1, "y", 1)[:40]
    assert [c.name for c in read_batch_results(text, "a.jsonl")] == ["x"]
    with pytest.raises(PipelineInvalid):  # with its newline, it is a broken line
        read_batch_results(text + "\n", "a.jsonl")


def test_a_line_separator_inside_a_string_does_not_split_a_line() -> None:
    line = _line(0, "x\u2028y", 1).replace("\\u2028", "\u2028")
    assert "\u2028" in line
    (case,) = read_batch_results(line + "\n", "a.jsonl")
    assert case.name == "x\u2028y"


def test_ignore_usage_makes_a_case_whose_usage_alone_differs_the_same(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.jsonl", [_line(0, "x", 1), _line(1, "y", 2)])
    b = _file(tmp_path, "b.jsonl", [_line(0, "x", 1, tokens=12), _line(1, "y", 3, tokens=12)])
    code, out, _ = cli("diff", a, b, "--ignore", "usage")
    assert code == 1
    assert out == (
        "case y:\n"
        "  ~ tickets/ticket\n"
        '      content: "urgency 2" -> "urgency 3"\n'
        "      /data/urgency: 2 -> 3\n"
        "1 of 2 cases differ\n"
    )
    found = json.loads(cli("diff", a, b, "--ignore", "usage", "--format", "json")[1])
    assert [c["case"] for c in found["cases"]] == ["y"]
    assert found["cases"][0]["usage"] == []
    assert "ignored" not in found["cases"][0]  # the batch's, given once
    assert (found["unchanged"], found["usage"], found["ignored"]) == (1, [], ["usage"])
    usage_only = _file(tmp_path, "c.jsonl", [_line(0, "x", 1, tokens=12), _line(1, "y", 2)])
    assert cli("diff", a, usage_only, "--ignore", "usage") == (
        0,
        "no difference (2 cases; usage not compared)\n",
        "",
    )


def test_ignore_is_checked_once_for_the_whole_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    a = read_batch_results("".join(_line(i, f"c{i}", 1) + "\n" for i in range(5)), "a.jsonl")
    b = read_batch_results("".join(_line(i, f"c{i}", 2) + "\n" for i in range(5)), "b.jsonl")
    made = []
    leaving_out = Comparison.leaving_out
    monkeypatch.setattr(
        Comparison,
        "leaving_out",
        classmethod(lambda cls, ignore: made.append(ignore) or leaving_out(ignore)),
    )
    found = diff_batches(a, b, {"usage"})
    assert (len(found.cases), found.ignored, made) == (5, ("usage",), [{"usage"}])


def test_an_unknown_section_is_refused_when_no_case_is_in_both_files() -> None:
    a = read_batch_results(_line(0, "x", 1) + "\n", "a.jsonl")
    b = read_batch_results(_line(0, "y", 1) + "\n", "b.jsonl")
    with pytest.raises(ValueError, match="not a section of a diff: \\['tokens'\\]"):
        diff_batches(a, b, {"tokens"})
