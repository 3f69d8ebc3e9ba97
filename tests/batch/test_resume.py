"""`--resume`: a batch killed with SIGKILL continues; no case is lost, none run twice."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from converge_dsl.batch import read_done
from converge_dsl.cli import run as cli
from converge_dsl.errors import UsageError

from .conftest import ECHO, expected, read_results, write_cases


def _resume(cases: Path, out: Path) -> tuple[int, str]:
    err = io.StringIO()
    code = cli(
        ["run", str(ECHO), "--cases", str(cases), "--out", str(out), "--resume"],
        io.StringIO(),
        err,
    )
    return code, err.getvalue()


def test_resume_after_sigkill_mid_batch(tmp_path: Path) -> None:
    count = 24
    cases = write_cases(
        tmp_path / "cases.jsonl", [{"id": f"c{i}", "word": f"slow {i}"} for i in range(count)]
    )
    out = tmp_path / "results.jsonl"
    command = [sys.executable, "-m", "converge_dsl", "run", str(ECHO), "--cases", str(cases)]
    child = subprocess.Popen(
        [*command, "--out", str(out), "--concurrency", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            if out.exists() and out.read_text().count("\n") >= 4:
                break
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    before = read_results(out)
    assert 4 <= len(before) < count  # killed mid-batch
    with out.open("a") as handle:  # and as if killed in the middle of a line
        handle.write('{"index": 23, "id": "c23", "exit_co')
    code, err = _resume(cases, out)
    assert code == 0, err
    assert f"resuming: {len(before)} case(s) already in the results" in err
    after = read_results(out)
    assert [line["index"] for line in after] == list(range(count))  # none lost, none twice
    assert after[: len(before)] != []
    assert all(line["exit_code"] == 0 for line in after)
    assert {json.dumps(line) for line in before} <= {json.dumps(line) for line in after}


def test_a_finished_batch_resumes_to_nothing(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": "a"}, {"word": "b"}])
    out = tmp_path / "results.jsonl"
    assert _resume(cases, out)[0] == 0  # --resume of a missing file: a fresh batch
    text = out.read_text()
    code, err = _resume(cases, out)
    assert code == 0
    assert out.read_text() == text
    assert "resuming: 2 case(s)" in err


def test_resume_counts_what_was_spent_against_the_batch_cap(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"w{i}"} for i in range(6)])
    out = tmp_path / "results.jsonl"
    args = ["run", str(ECHO), "--cases", str(cases), "--out", str(out), "--max-model-calls", "4"]
    first = cases.read_text().splitlines()[:3]
    cases.write_text("\n".join(first) + "\n")
    cli(args, io.StringIO(), io.StringIO())
    cases.write_text("\n".join(first + [json.dumps({"word": f"w{i}"}) for i in range(3, 6)]) + "\n")
    cli([*args, "--resume"], io.StringIO(), io.StringIO())
    lines = read_results(out)
    assert len(lines) == 6
    assert sum(line["usage"]["model_calls"] for line in lines) == 4


def test_resume_refuses_results_of_other_cases(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": "a"}, {"id": "b"}])
    out = tmp_path / "results.jsonl"
    _resume(cases, out)
    write_cases(cases, [{"id": "x"}, {"id": "b"}])
    code, err = _resume(cases, out)
    assert code == 3
    assert "holds a result for case 0 (id 'a')" in err


def test_read_done_cuts_a_torn_last_line_only(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    out.write_text('{"index":0,"id":null,"usage":{"model_calls":2}}\n{"index":1,"id"')
    done = read_done(out)
    assert done.ids == {0: None}
    assert done.model_calls == 2
    assert out.read_text().endswith("}}\n")
    out.write_text('{"index":0}\nnot ours\n')
    with pytest.raises(UsageError, match="line 2 is not a result line"):
        read_done(out)


@pytest.mark.parametrize(
    "text",
    [
        b"my notes\nthe last line, without its newline",
        b"not a result line\n" + b'{"index": 0, "id": "c0"}',
        b"a single line, no newline",
    ],
    ids=["foreign", "foreign-first-line", "one-torn-foreign-line"],
)
def test_resume_never_cuts_a_file_that_is_not_a_results_file(tmp_path: Path, text: bytes) -> None:
    """`--out` naming someone's file: refused, and not one byte of it is cut first."""
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": "c0", "word": "a"}])
    out = tmp_path / "notes.txt"
    out.write_bytes(text)
    code, err = _resume(cases, out)
    assert code == 3, err
    assert "not a result" in err or "not overwritten" in err
    assert out.read_bytes() == text


@pytest.mark.parametrize(
    "usage",
    ["[1]", '"many"', '{"model_calls": "3"}', '{"input_tokens": 1.5}', '{"output_tokens": null}'],
)
def test_resume_reports_a_result_line_with_malformed_usage(tmp_path: Path, usage: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": "c0", "word": "a"}])
    out = tmp_path / "results.jsonl"
    out.write_text(f'{{"index": 0, "id": "c0", "usage": {usage}}}\n')
    code, err = _resume(cases, out)
    assert (code, "Traceback" in err) == (3, False), err
    assert "line 1 is not a result line" in err


TORN = '{"index":0,"id":null,"usage":{}}\n{"index":1,"id"'


@pytest.mark.parametrize("how", ["symlink", "hardlink", "foreign", "torn foreign", "cases"])
def test_resume_checks_out_is_a_results_file_before_changing_a_byte(
    tmp_path: Path, how: str
) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": "a"}, {"word": "b"}])
    out = tmp_path / "results.jsonl"
    victim = tmp_path / "victim.txt"
    victim.write_text(TORN)
    if how == "symlink":
        out.symlink_to(victim)
    elif how == "hardlink":
        os.link(victim, out)
    elif how == "cases":
        out, victim = cases, cases
        victim.write_text(cases.read_text() + '{"word": "c"')  # a torn last line too
    else:
        victim = out
        out.write_text("my notes\nand more" if how == "foreign" else '{"not": "ours"}\n{"a"')
    before = victim.read_bytes()
    code, err = _resume(cases, out)
    assert code == 3, err
    assert victim.read_bytes() == before
    assert "--out" in err


def test_resume_refuses_out_given_as_the_cases_file_even_when_it_looks_like_results(
    tmp_path: Path,
) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"index": 0, "word": "a"}\n{"index": 1, "word": "b"')
    before = cases.read_bytes()
    code, err = _resume(cases, cases)
    assert code == 3
    assert "cases file" in err
    assert cases.read_bytes() == before


def test_a_result_holding_a_unicode_line_separator_stays_one_line(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": "a", "word": "x\u2028y\u2029z\x85"}])
    out = tmp_path / "results.jsonl"
    assert _resume(cases, out)[0] == 0
    with out.open("a", encoding="utf-8") as handle:  # our own lines keep such characters raw
        handle.write(json.dumps({"index": 1, "id": "\u2028", "usage": {}}, ensure_ascii=False))
        handle.write("\n")
    done = read_done(out)
    assert done.ids == {0: "a", 1: "\u2028"}


def _pipeline_copies(tmp_path: Path) -> tuple[Path, Path]:
    """The echo pipeline copied into `tmp_path`, and another pipeline beside it."""
    for name in ("echo.yaml", "echo.script.yaml"):
        (tmp_path / name).write_text((ECHO.parent / name).read_text())
    other = tmp_path / "other.yaml"
    other.write_text(ECHO.read_text().replace("name: echo", "name: other"))
    return tmp_path / "echo.yaml", other


def _resume_with(pipeline: Path, *options: str) -> tuple[int, str]:
    err = io.StringIO()
    args = ["run", str(pipeline), "--cases", "cases.jsonl", "--out", "results.jsonl", *options]
    code = cli([*args, "--resume"], io.StringIO(), err)
    return code, err.getvalue()


@pytest.mark.parametrize("executor", ["local", "process"])
def test_resume_refuses_the_results_of_another_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: str
) -> None:
    """Another pipeline's results file is refused before any case runs, at its line."""
    monkeypatch.chdir(tmp_path)
    echo, other = _pipeline_copies(tmp_path)
    write_cases(tmp_path / "cases.jsonl", [{"id": "a"}])
    assert _resume_with(echo)[0] == 0
    write_cases(tmp_path / "cases.jsonl", [{"id": "a"}, {"id": "b"}])
    before = (tmp_path / "results.jsonl").read_bytes()
    code, err = _resume_with(other, "--executor", executor)
    assert code == 3
    assert err == expected("resume-other-pipeline.txt", err)
    assert (tmp_path / "results.jsonl").read_bytes() == before


def test_resume_refuses_the_results_of_the_pipeline_before_an_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    echo, _ = _pipeline_copies(tmp_path)
    write_cases(tmp_path / "cases.jsonl", [{"id": "a"}, {"id": "b"}])
    assert _resume_with(echo)[0] == 0
    echo.write_text(echo.read_text().replace("Say", "Utter"))
    code, err = _resume_with(echo)
    assert code == 3
    assert err == expected("resume-edited-pipeline.txt", err)


@pytest.mark.parametrize("executor", ["local", "process"])
def test_each_result_line_names_its_pipeline_as_a_checkpoint_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, executor: str
) -> None:
    """The digest of a line is the one a checkpoint journal keeps of the pipeline text."""
    monkeypatch.chdir(tmp_path)
    echo, _ = _pipeline_copies(tmp_path)
    write_cases(tmp_path / "cases.jsonl", [{"id": "a"}, {"id": "b"}, "not a case"])
    assert _resume_with(echo, "--executor", executor)[0] == 1  # the third case cannot run
    env = {**os.environ, "CONVERGE_DSL_CONFIG_DIR": str(tmp_path / "cfg")}
    args = ["run", str(echo), "--checkpoint", "ck"]
    assert cli(args, io.StringIO(), io.StringIO(), environ=env) == 0
    head = json.loads((tmp_path / "ck" / "checkpoint.jsonl").read_text().splitlines()[0])
    stamp = {"name": "echo", "sha256": head["record"]["pipeline_text"]}
    lines = read_results(tmp_path / "results.jsonl")
    assert [line["pipeline"] for line in lines] == [stamp] * 3
    assert all(list(line)[:4] == ["index", "id", "exit_code", "pipeline"] for line in lines)


def test_resume_takes_lines_written_before_they_named_their_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A line without `pipeline` names none: it is taken as this pipeline's."""
    monkeypatch.chdir(tmp_path)
    echo, other = _pipeline_copies(tmp_path)
    write_cases(tmp_path / "cases.jsonl", [{"id": "a"}])
    assert _resume_with(echo)[0] == 0
    out = tmp_path / "results.jsonl"
    old = [json.loads(line) for line in out.read_text().splitlines()]
    out.write_text(
        "".join(
            json.dumps({k: v for k, v in line.items() if k != "pipeline"}) + "\n" for line in old
        )
    )
    write_cases(tmp_path / "cases.jsonl", [{"id": "a"}, {"id": "b"}])
    code, err = _resume_with(other)
    assert code == 0, err
    lines = read_results(out)
    assert ["pipeline" in line for line in lines] == [False, True]
    assert lines[1]["pipeline"]["name"] == "other"


@pytest.mark.parametrize(
    "stamp",
    [
        '"echo"',
        '{"name": "echo"}',
        '{"name": 1, "sha256": "' + "0" * 64 + '"}',
        '{"name": "echo", "sha256": "abc"}',
    ],
)
def test_resume_reports_a_result_line_with_a_malformed_pipeline(tmp_path: Path, stamp: str) -> None:
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": "c0", "word": "a"}])
    out = tmp_path / "results.jsonl"
    out.write_text(f'{{"index": 0, "id": "c0", "pipeline": {stamp}, "usage": {{}}}}\n')
    code, err = _resume(cases, out)
    assert (code, "Traceback" in err) == (3, False), err
    assert "line 1 is not a result line" in err
