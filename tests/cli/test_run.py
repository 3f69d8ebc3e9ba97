"""`converge-dsl run`: what a program reading its standard output gets when it is interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from converge_dsl.runtime import RunResultDocument

# One llm suggestor whose model answers only after a minute: a run to interrupt.
PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: slow
models:
  default: {adapter: scripted, script: slow.script.yaml}
suggestors:
  - name: answer
    kind: llm
    model: default
    target: hypotheses
    prompt: {user: "Say something"}
    output: {format: text, id: answer}
"""
SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {reply: "too late", delay_s: 60}
"""


def _interrupted(tmp_path: Path, *options: str) -> tuple[int, str, str]:
    """Run the slow pipeline, send it a real SIGINT once its model call started."""
    (tmp_path / "slow.yaml").write_text(PIPELINE)
    (tmp_path / "slow.script.yaml").write_text(SCRIPT)
    trace = tmp_path / "trace.jsonl"
    command = [sys.executable, "-m", "converge_dsl", "run", "slow.yaml", "--trace", str(trace)]
    child = subprocess.Popen(
        [*command, *options],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and child.poll() is None:
            if trace.exists() and "model_call_started" in trace.read_text():
                break
            time.sleep(0.02)
        assert child.poll() is None, "the run ended before it was interrupted"
        os.kill(child.pid, signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, out, err


def test_an_interrupted_json_run_prints_its_document_cancelled(tmp_path: Path) -> None:
    code, out, err = _interrupted(tmp_path, "--format", "json")
    assert code == 130
    assert err == "interrupted\n"
    document = RunResultDocument.model_validate(json.loads(out))
    assert document.stop_reason == "cancelled"
    assert not document.converged
    assert [(d.code, d.file, d.line) for d in document.diagnostics] == [("CD908", "slow.yaml", 1)]
    assert "interrupted (Ctrl-C, SIGINT)" in document.diagnostics[0].message


@pytest.mark.parametrize("quiet", [False, True])
def test_an_interrupted_human_run_prints_no_document(tmp_path: Path, quiet: bool) -> None:
    code, out, err = _interrupted(tmp_path, *(["-q"] if quiet else []))
    assert code == 130
    assert err.endswith("interrupted\n")
    assert "cancelled" not in out
