"""`converge-dsl run --cases --out`: result lines, isolation of failing cases, executors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run as cli

from .conftest import ECHO, expected, read_results, write_cases


def batch(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(["run", str(ECHO), *args], out, err)
    return code, out.getvalue(), err.getvalue()


def test_every_case_gets_its_line_tagged_with_index_and_id(tmp_path: Path) -> None:
    words = ["slow", "a", "b", "slow", "c"]
    cases = write_cases(
        tmp_path / "cases.jsonl", [{"id": f"w{i}", "word": w} for i, w in enumerate(words)]
    )
    out = tmp_path / "results.jsonl"
    code, stdout, stderr = batch("--cases", str(cases), "--out", str(out), "--concurrency", "5")
    assert code == 0, stderr
    raw = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["index"] for line in raw] != list(range(5))  # written as they finish
    lines = read_results(out)
    assert [(line["index"], line["id"]) for line in lines] == [(i, f"w{i}") for i in range(5)]
    assert [line["facts"]["signals"][0]["content"] for line in lines] == [
        f"answered {w}" for w in words
    ]
    assert all(line["exit_code"] == 0 and line["stop_reason"] == "converged" for line in lines)
    assert "converged" in stdout
    assert "5" in stdout
    assert "5/5 cases" in stderr  # plain progress off a terminal


def test_a_failing_case_never_stops_the_others(tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [
            {"word": "a"},
            "not json",
            {"word": "boom"},
            [1, 2],
            {"id": [1], "word": "c"},
            {"id": 7, "word": "b"},
        ],
    )
    out = tmp_path / "results.jsonl"
    code, stdout, _ = batch("--cases", str(cases), "--out", str(out), "--format", "json")
    assert code == 1
    lines = read_results(out)
    assert [line["stop_reason"] for line in lines] == [
        "converged",
        "usage_error",
        "error",
        "usage_error",
        "usage_error",
        "converged",
    ]
    assert [line["exit_code"] for line in lines] == [0, 3, 1, 3, 3, 0]
    assert lines[2]["diagnostics"][0]["code"] == "CD911"
    assert lines[5]["id"] == 7
    summary = json.loads(stdout)
    assert summary["stop_reasons"] == {"converged": 2, "error": 1, "usage_error": 3}


def test_batch_wide_model_call_cap(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"w{i}"} for i in range(10)])
    out = tmp_path / "results.jsonl"
    code, _, _ = batch(
        "--cases", str(cases), "--out", str(out), "--max-model-calls", "4", "--concurrency", "3"
    )
    assert code == 1
    lines = read_results(out)
    assert sum(line["usage"]["model_calls"] for line in lines) == 4
    stops = [line["stop_reason"] for line in lines]
    assert stops.count("converged") == 4
    assert stops.count("model_call_budget_exhausted") == 6


@pytest.mark.parametrize(
    ("flag", "value", "code", "setting"),
    [
        ("--max-model-calls", "2", "CD904", "max_model_calls"),
        ("--max-tokens", "20", "CD903", "max_tokens"),
    ],
)
def test_a_case_refused_by_the_batch_cap_names_that_cap_not_its_own_budget(
    tmp_path: Path, flag: str, value: str, code: str, setting: str
) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"w{i}"} for i in range(4)])
    out = tmp_path / "results.jsonl"
    batch("--cases", str(cases), "--out", str(out), flag, value, "--concurrency", "1")
    refused = read_results(out)[-1]["diagnostics"]
    assert [(d["code"], d["path"], d.get("suggestor")) for d in refused] == [
        (code, "suggestors[0]", "answer")
    ]
    assert refused[0]["message"].startswith(f"the batch's cap {flag} {value} reached: ")
    assert refused[0]["hint"] == (
        f"raise {flag} (the cap of the batch as a whole; "
        f"this run's own budget.{setting} was not reached)"
    )


def test_batch_wide_token_cap(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"w{i}"} for i in range(6)])
    out = tmp_path / "results.jsonl"
    # 20 tokens: room for one case's call (its input estimate plus the minimum answer cap)
    batch("--cases", str(cases), "--out", str(out), "--max-tokens", "20", "--concurrency", "1")
    lines = read_results(out)
    stops = [line["stop_reason"] for line in lines]
    assert stops == ["converged"] + ["token_budget_exhausted"] * 5
    assert (
        sum(line["usage"]["input_tokens"] + line["usage"]["output_tokens"] for line in lines) <= 20
    )


def test_identical_results_across_local_and_process(tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [{"id": i, "word": w} for i, w in enumerate(["ab", "boom", "c", "d"])],
    )
    results = {}
    for executor in ("local", "process"):
        out = tmp_path / f"{executor}.jsonl"
        code, _, err = batch(
            "--cases", str(cases), "--out", str(out), "--executor", executor, "--concurrency", "2"
        )
        assert code == 1, err
        results[executor] = read_results(out)
    assert results["local"] == results["process"]
    assert len(results["local"]) == 4


def test_the_process_executor_shares_the_batch_cap(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"w{i}"} for i in range(8)])
    out = tmp_path / "results.jsonl"
    batch(
        "--cases",
        str(cases),
        "--out",
        str(out),
        "--executor",
        "process",
        "--concurrency",
        "2",
        "--max-model-calls",
        "3",
    )
    lines = read_results(out)
    assert len(lines) == 8
    assert sum(line["usage"]["model_calls"] for line in lines) == 3


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--input", "word=x"], "--input is an option of a single run"),
        (["--resume", "somewhere"], "--resume takes no folder"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--ray-address", "auto"], "--ray-address needs --executor ray"),
    ],
)
def test_options_a_batch_refuses(tmp_path: Path, extra: list[str], message: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{}])
    code, _, err = batch("--cases", str(cases), "--out", str(tmp_path / "r.jsonl"), *extra)
    assert code == 3
    assert message in err


def test_out_is_required_and_never_overwrites_a_foreign_file(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{}])
    code, _, err = batch("--cases", str(cases))
    assert code == 3
    assert "--cases needs --out" in err
    foreign = tmp_path / "notes.txt"
    foreign.write_text("my notes\n")
    code, _, err = batch("--cases", str(cases), "--out", str(foreign))
    assert code == 3
    assert "not a results file written by converge-dsl" in err
    assert foreign.read_text() == "my notes\n"


def test_an_invalid_pipeline_fails_before_any_case(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: converge-dsl/v1\nkind: Pipeline\nname: x\nbogus: 1\n")
    cases = write_cases(tmp_path / "cases.jsonl", [{}])
    out = tmp_path / "r.jsonl"
    code = cli(
        ["run", str(bad), "--cases", str(cases), "--out", str(out)], io.StringIO(), io.StringIO()
    )
    assert code == 2
    assert not out.exists()


def test_a_bare_resume_without_cases_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = batch("--resume")
    assert code == 3
    assert "--resume needs DIR" in err


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_a_cases_file_with_no_case_is_a_located_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    # It ran 0 cases and exited 0, where `eval` refuses an empty dataset (CD340).
    monkeypatch.chdir(tmp_path)
    Path("cases.jsonl").write_text(text, encoding="utf-8")
    code, out, err = batch("--cases", "cases.jsonl", "--out", "results.jsonl")
    assert (code, out) == (3, "")
    assert err == expected("no-case.txt", err)
    assert not Path("results.jsonl").exists()
    code, out, _ = batch("--cases", "cases.jsonl", "--out", "results.jsonl", "--format", "json")
    assert code == 3
    assert json.loads(out)["error"]["where"] == "cases.jsonl:1:1"


@pytest.mark.parametrize("executor", ["local", "process"])
def test_a_bad_case_is_reported_at_its_line_of_the_cases_file(
    tmp_path: Path, executor: str
) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"word": "a"}\n\nnot json\n{"id": [1]}\n[1, 2]\n', encoding="utf-8")
    out = tmp_path / "results.jsonl"
    code, _, _ = batch("--cases", str(cases), "--out", str(out), "--executor", executor)
    assert code == 1
    where = [
        (d["code"], d["file"], d["line"], d["end_column"])
        for line in read_results(out)
        for d in line["diagnostics"]
    ]
    assert where == [
        ("CD338", str(cases), 3, 9),
        ("CD338", str(cases), 4, 12),
        ("CD338", str(cases), 5, 7),
    ]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85", "\x0c", "\r"])
def test_a_case_holding_a_unicode_line_break_is_one_case(tmp_path: Path, separator: str) -> None:
    from converge_dsl.batch._cases import read_cases

    cases = tmp_path / "cases.jsonl"
    raw = json.dumps({"id": "one", "word": f"a{separator}b"}, ensure_ascii=False)
    cases.write_text(raw + "\n" + json.dumps({"id": "two"}) + "\n", encoding="utf-8", newline="")
    read = read_cases(cases)
    assert [(case.id, case.problem) for case in read] == [("one", None), ("two", None)]
    assert read[0].inputs == {"word": f"a{separator}b"}
