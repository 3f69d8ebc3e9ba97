"""The checkpoint journal through the command line: inputs kept, the printed resume command
works as printed, a kill mid-append resumes to the same result, an edited fact is refused."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parent.parent.parent

PAUSING = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
inputs:
  region: {description: where}
promotion: {gated_keys: [strategies]}
seeds: [{id: a, content: "in {{ inputs.region }}"}]
suggestors:
  - name: plan
    kind: rule
    when: "true"
    emit:
      - {key: strategies, id: s1, content: "go big in {{ inputs.region }}"}
  - name: review
    kind: rule
    dependencies: [strategies]
    emit: [{key: evaluations, id: "e-{{ count('strategies') }}", content: reviewed}]
"""

CHAIN_LENGTH = 12


def _chain() -> str:
    lines = [
        "apiVersion: converge-dsl/v1",
        "kind: Pipeline",
        "name: chain",
        "inputs:",
        "  word: {description: a word}",
        "keys: [" + ", ".join(f"{{name: k{i}}}" for i in range(CHAIN_LENGTH)) + "]",
        "seeds: [{id: start, content: go}]",
        "suggestors:",
    ]
    for i in range(CHAIN_LENGTH):
        source = "seeds" if i == 0 else f"k{i - 1}"
        lines += [
            f"  - name: r{i}",
            "    kind: rule",
            f"    dependencies: [{source}]",
            f"    emit: [{{key: k{i}, id: 'f{i}', content: '{{{{ inputs.word }}}} {i}'}}]",
        ]
    return "\n".join(lines) + "\n"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_printed_resume_command_works_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "a dir with 'quotes'"
    folder.mkdir()
    pipeline = _write(folder, "p.yaml", PAUSING)
    monkeypatch.chdir(folder)
    code, _, err = cli("run", "p.yaml", "--input", "region=Nordics", "--checkpoint", folder / "ck")
    assert code == 6, err
    printed = re.search(r"continue with `([^`]+)`", err)
    assert printed is not None, err
    words = shlex.split(printed.group(1))
    assert words[:2] == ["converge-dsl", "run"]
    assert "--input" not in words  # the checkpoint keeps the inputs
    code, out, err = cli(*words[1:], "--format", "json")
    assert code == 0, err
    facts = json.loads(out)["facts"]
    assert facts["strategies"][0]["content"] == "go big in Nordics"
    assert pipeline.exists()


def test_the_printed_resume_command_of_a_folder_with_a_control_character_pastes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The command was shell-quoted, then its ESC escaped when printed: 'a\x1bb/ck',
    # which a shell reads as a folder of another name.
    import shutil
    import subprocess

    folder = tmp_path / "a\x1bb"
    folder.mkdir()
    _write(folder, "p.yaml", PAUSING)
    monkeypatch.chdir(folder)
    code, _, err = cli("run", "p.yaml", "--input", "region=Nordics", "--checkpoint", folder / "ck")
    assert code == 6, err
    assert "\x1b" not in err
    printed = re.search(r"continue with `([^`]+)`", err)
    assert printed is not None, err
    bash = shutil.which("bash")
    assert bash is not None
    said = subprocess.run(
        [bash, "-c", f"printf '%s\\n' {printed.group(1)}"],
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert os.fsencode(folder / "ck") in said.stdout.splitlines()


def test_resume_needs_no_input_and_refuses_other_inputs(tmp_path: Path) -> None:
    pipeline = _write(tmp_path, "p.yaml", PAUSING)
    ck = tmp_path / "ck"
    assert cli("run", pipeline, "--input", "region=Iberia", "--checkpoint", ck)[0] == 6
    code, _, err = cli("run", pipeline, "--resume", ck, "--input", "region=Baltics")
    assert code == 3
    assert "[CD952]" in err
    assert "other inputs" in err
    same = ("--input", "region=Iberia")
    code, _, err = cli("run", pipeline, "--resume", ck, *same, "--approve", "s1")
    assert code == 0, err


def test_an_edited_fact_is_refused_naming_its_record(tmp_path: Path) -> None:
    pipeline = _write(tmp_path, "p.yaml", PAUSING)
    ck = tmp_path / "ck"
    assert cli("run", pipeline, "--input", "region=Iberia", "--checkpoint", ck)[0] == 6
    journal = ck / "checkpoint.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    assert '"confidence":1.0' in lines[1]
    lines[1] = lines[1].replace('"confidence":1.0', '"confidence":0.1', 1)
    journal.write_text("".join(lines), encoding="utf-8")
    code, _, err = cli("run", pipeline, "--resume", ck, "--approve", "s1")
    assert code == 3
    assert "error[CD950]: checkpoint refused: record 1 (cycle 1)" in err
    assert "Traceback" not in err


HARNESS = """
import os, signal, sys
from converge_dsl.runtime import _journal
append = _journal.Appender.append
def torn_append(self, line):
    if b'"cycle":{cycle},' in line and {kill}:
        os.write(self._fd, line[: len(line) // 2])  # killed mid-write of this record
        os.kill(os.getpid(), signal.SIGKILL)
    append(self, line)
_journal.Appender.append = torn_append
from converge_dsl.cli import run
sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))
"""


def _harness(tmp_path: Path, kill: bool, *argv: str | Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "harness.py"
    script.write_text(HARNESS.format(kill=kill, cycle=5))
    return subprocess.run(
        [sys.executable, str(script), *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
        env={**os.environ},
    )


def test_a_kill_mid_append_resumes_to_the_same_result(tmp_path: Path) -> None:
    pipeline = _write(tmp_path, "chain.yaml", _chain())
    whole = _harness(tmp_path, False, "run", pipeline, "--format", "json", "--input", "word=hi")
    assert whole.returncode == 0, whole.stderr
    ck = tmp_path / "ck"
    argv = ("run", pipeline, "--format", "json")
    killed = _harness(tmp_path, True, *argv, "--input", "word=hi", "--checkpoint", ck)
    assert killed.returncode == -signal.SIGKILL
    raw = (ck / "checkpoint.jsonl").read_bytes()
    assert not raw.endswith(b"\n")  # the torn record is there
    last = json.loads(raw[: raw.rindex(b"\n")].splitlines()[-1])["record"]
    assert last["cycle"] == 4
    resumed = _harness(tmp_path, False, *argv, "--resume", ck)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == json.loads(whole.stdout)
    assert (ck / "checkpoint.jsonl").read_bytes().endswith(b"\n")


def test_a_resume_from_each_record_of_the_journal_gives_the_straight_run(tmp_path: Path) -> None:
    """Whichever record a run was stopped after, its continuation ends where the run did."""
    pipeline = _write(tmp_path, "chain.yaml", _chain())
    argv = ("run", pipeline, "--format", "json")
    code, straight, err = cli(*argv, "--input", "word=hi", "--checkpoint", tmp_path / "ck")
    assert code == 0, err
    lines = (tmp_path / "ck" / "checkpoint.jsonl").read_bytes().splitlines(keepends=True)
    assert len(lines) == CHAIN_LENGTH + 1  # the snapshot, then a record per cycle
    for kept in range(1, len(lines) + 1):
        folder = tmp_path / f"after-{kept}"
        folder.mkdir()
        (folder / "checkpoint.jsonl").write_bytes(b"".join(lines[:kept]))
        code, resumed, err = cli(*argv, "--resume", folder)
        assert code == 0, (kept, err)
        assert json.loads(resumed) == json.loads(straight), kept
