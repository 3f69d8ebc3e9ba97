"""`converge-dsl diff A B`: facts added, removed and changed, stop reasons, usage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from converge_dsl.pipetest._run_diff import diff_results

from .conftest import ROOT, cli


def _run(folder: Path, out: str) -> Path:
    code, text, err = cli("run", folder / "incident-triage.yaml", "--format", "json")
    assert code == 0, err
    (folder / out).write_text(text)
    return folder / out


def test_a_changed_answer_shows_the_changed_fact_and_nothing_else(tmp_path: Path) -> None:
    for name in ("incident-triage.yaml", "incident-triage.script.yaml"):
        shutil.copy(ROOT / "pipelines" / name, tmp_path / name)
    a = _run(tmp_path, "a.json")
    script = tmp_path / "incident-triage.script.yaml"
    script.write_text(script.read_text().replace('"likelihood": 0.8', '"likelihood": 0.7'))
    b = _run(tmp_path, "b.json")
    code, out, _ = cli("diff", a, b)
    assert code == 1
    assert out == (
        "~ hypotheses/bad-deploy\n"
        '    content: "v2.31 introduced a slow query (likelihood 0.8)"'
        ' -> "v2.31 introduced a slow query (likelihood 0.7)"\n'
        "    confidence: 0.8 -> 0.7\n"
        "    /data/likelihood: 0.8 -> 0.7\n"
    )
    assert cli("diff", a, a) == (0, "no difference\n", "")
    code, out, _ = cli("diff", a, b, "--format", "json")
    assert json.loads(out)["facts"][0]["fields"][2] == {
        "what": "/data/likelihood",
        "a": 0.8,
        "b": 0.7,
    }


def test_added_and_removed_facts_stop_reasons_and_usage() -> None:
    a = {"stop_reason": "converged", "usage": {"model_calls": 1}, "facts": {"k": [{"id": "x"}]}}
    b = {"stop_reason": "budget", "usage": {"model_calls": 2}, "facts": {"k": [{"id": "y"}]}}
    found = diff_results(a, b)
    assert [(f.id, f.change) for f in found.facts] == [("x", "removed"), ("y", "added")]
    assert found.stop_reason == ("converged", "budget")
    assert found.usage == (("model_calls", 1, 2),)


def test_a_file_that_is_not_a_run_result_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("[]")
    code, _, err = cli("diff", bad, bad)
    assert code == 3
    assert "is not a run result" in err


def test_a_file_that_is_not_json_is_named_as_a_run_result(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    code, _, err = cli("diff", bad, bad)
    assert code == 3
    assert f"run result {bad} is not JSON" in err


def test_a_fifo_is_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)
    code, _, err = cli("diff", fifo, fifo)
    assert code == 3
    assert "FIFO" in err or "fifo" in err


def test_a_field_that_is_not_there_is_told_from_a_null() -> None:
    a = {"facts": {"k": [{"id": "x", "data": {"due": None}}]}}
    b = {"facts": {"k": [{"id": "x", "data": {"due": None, "deadline": 30}}]}}
    found = diff_results(a, b)
    assert found.text() == "~ k/x\n    /data/deadline: (absent) -> 30\n"
    assert found.as_json()["facts"][0]["fields"] == [{"what": "/data/deadline", "b": 30}]
    nulled = diff_results(b, {"facts": {"k": [{"id": "x", "data": {"due": 1, "deadline": 30}}]}})
    assert nulled.text() == "~ k/x\n    /data/due: null -> 1\n"  # as JSON, not None


def test_true_and_1_are_different_data() -> None:
    # Python's True == 1 hid this change
    a = {"facts": {"k": [{"id": "x", "data": {"done": 1, "n": 2}}]}}
    b = {"facts": {"k": [{"id": "x", "data": {"done": True, "n": 2.0}}]}}
    assert diff_results(a, b).text() == "~ k/x\n    /data/done: 1 -> true\n"  # not True


def _sides(tmp_path: Path) -> tuple[Path, Path]:
    fact = {"id": "x", "content": "same", "confidence": 0.5}
    a = {"stop_reason": "converged", "usage": {"input_tokens": 10}, "facts": {"k": [fact]}}
    b = {
        "stop_reason": "budget",
        "usage": {"input_tokens": 12},
        "facts": {"k": [{**fact, "confidence": 0.6}]},
    }
    for name, body in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(body), encoding="utf-8")
    return tmp_path / "a.json", tmp_path / "b.json"


def test_ignore_leaves_sections_out_of_the_comparison(tmp_path: Path) -> None:
    a, b = _sides(tmp_path)
    assert cli("diff", a, b)[1] == (
        "~ k/x\n"
        "    confidence: 0.5 -> 0.6\n"
        "stop reason: converged -> budget\n"
        "usage input_tokens: 10 -> 12\n"
    )
    assert cli("diff", a, b, "--ignore", "usage")[:2] == (
        1,
        "~ k/x\n    confidence: 0.5 -> 0.6\nstop reason: converged -> budget\n",
    )
    assert cli("diff", a, b, "--ignore", "usage,confidence")[:2] == (
        1,
        "stop reason: converged -> budget\n",
    )
    # every difference left out: the same, exit 0, and the text says what was not compared
    everything = ("--ignore", "usage", "--ignore", "stop-reason,confidence")
    assert cli("diff", a, b, *everything) == (
        0,
        "no difference (usage, stop reason and confidence not compared)\n",
        "",
    )
    code, out, _ = cli("diff", a, b, "--ignore", "confidence,usage", "--format", "json")
    found = json.loads(out)
    assert code == 1
    assert (found["facts"], found["usage"]) == ([], [])
    assert found["stop_reason"] == ["converged", "budget"]
    assert found["ignored"] == ["usage", "confidence"]  # in the sections' own order
    assert json.loads(cli("diff", a, b, "--format", "json")[1])["ignored"] == []


def test_an_unknown_section_to_ignore_is_a_usage_error_with_a_guess(tmp_path: Path) -> None:
    a, b = _sides(tmp_path)
    code, out, err = cli("diff", a, b, "--ignore", "usage,stop_reason")
    assert (code, out) == (3, "")
    assert "'stop_reason' is not a section of a diff" in err
    assert "did you mean 'stop-reason'?" in err
    assert "usage, stop-reason, confidence" in err


def test_an_output_that_is_a_compared_file_or_a_missing_folder_is_refused_before_a_byte(
    tmp_path: Path,
) -> None:
    for name in ("incident-triage.yaml", "incident-triage.script.yaml"):
        shutil.copy(ROOT / "pipelines" / name, tmp_path / name)
    a = _run(tmp_path, "a.json")
    kept = a.read_bytes()
    for output, named in ((a, "A"), (tmp_path / "link.json", "A")):
        if output.name == "link.json":
            output.symlink_to(a)
        code, out, err = cli("diff", a, a, "-o", output)
        assert (code, out) == (3, "")
        refused = f"error[CD336]: -o '{output}' is {named}, a file compared; it would be "
        refused += "overwritten"
        assert refused in err
        assert a.read_bytes() == kept
    code, _, err = cli("diff", a, a, "-o", tmp_path / "no" / "diff.txt")
    assert code == 3
    assert "No such file or directory" in err
    code, _, _ = cli("diff", a, tmp_path / "missing.json", "-o", tmp_path / "diff.txt")
    assert code == 3
    assert not (tmp_path / "diff.txt").exists()  # nothing made for a diff that failed
    (tmp_path / "diff.txt").write_text("an earlier diff, longer than the next one\n")
    assert cli("diff", a, a, "-o", tmp_path / "diff.txt")[0] == 0
    assert (tmp_path / "diff.txt").read_text() == "no difference\n"


def test_an_output_that_is_a_device_or_a_link_to_one_is_written_as_it_is(
    tmp_path: Path,
) -> None:
    # `-o /dev/null` and `-o /dev/stdout` are common in scripts: the output checks made
    # for files had started refusing them ("a character device", "a symbolic link").
    for name in ("incident-triage.yaml", "incident-triage.script.yaml"):
        shutil.copy(ROOT / "pipelines" / name, tmp_path / name)
    a = _run(tmp_path, "a.json")
    (tmp_path / "sink").symlink_to(os.devnull)
    for output in (Path(os.devnull), tmp_path / "sink"):
        code, out, err = cli("diff", a, a, "-o", output)
        assert (code, out, err) == (0, "", "")
    assert (tmp_path / "sink").is_symlink()


def test_an_output_of_dev_stdout_is_standard_output_whatever_it_is(tmp_path: Path) -> None:
    # `-o /dev/stdout > FILE` made /dev/stdout a link to a regular file, which the
    # output opener refused ("it is a symbolic link").
    for name in ("incident-triage.yaml", "incident-triage.script.yaml"):
        shutil.copy(ROOT / "pipelines" / name, tmp_path / name)
    a = _run(tmp_path, "a.json")
    for output in ("/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"):
        code, out, err = cli("diff", a, a, "-o", output)
        assert (code, out, err) == (0, "no difference\n", "")
    with (tmp_path / "diff.txt").open("w") as file:
        done = subprocess.run(
            [sys.executable, "-m", "converge_dsl", "diff", a, a, "-o", "/dev/stdout"],
            stdout=file,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert (done.returncode, done.stderr) == (0, "")
    assert (tmp_path / "diff.txt").read_text() == "no difference\n"


def test_control_and_bidi_characters_of_the_results_are_shown_escaped(tmp_path: Path) -> None:
    # A run's keys, ids and stop reason went to the terminal as they were: an escape
    # sequence recoloured or cleared it, a right-to-left override reversed the line.
    key, fact = "k\x1b[31m", {"id": "x\u202eyz"}
    a = {"stop_reason": "converged", "facts": {key: [{**fact, "content": "a"}]}}
    b = {"stop_reason": "budget\x1b[2J", "facts": {key: [{**fact, "content": "b"}]}}
    for name, body in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(body), encoding="utf-8")
    code, out, _ = cli("diff", tmp_path / "a.json", tmp_path / "b.json")
    assert code == 1
    assert out == (
        "~ k\\x1b[31m/x\\u202eyz\n"
        '    content: "a" -> "b"\n'
        "stop reason: converged -> budget\\x1b[2J\n"
    )
