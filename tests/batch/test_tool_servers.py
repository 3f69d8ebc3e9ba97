"""A batch starts each stdio tool server once per worker, not once per case: the runs of
one worker borrow it from the pipeline's pool (`converge_dsl.tools.ServerPool`); it stops
when the worker ends. A server that fails is dropped and started afresh. Counted by the
starts the fixture server writes down."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import time
from pathlib import Path

import pytest

from converge_dsl.cli import run as cli
from converge_dsl.frontend import StdioServerSpec
from converge_dsl.tools import ServerPool, ToolFailure

from .conftest import read_results, write_cases

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "tools" / "fastmcp_server.py"

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: pooled
inputs:
  word: {{default: hello}}
tools:
  fixture:
    command: [{python}, {fixture}, stdio, "0", {marker}]
    allow: [echo]
seeds: [{{id: go, content: go}}]
suggestors:
  - name: shout
    kind: tool
    call: mcp:fixture/echo
    dependencies: [seeds]
    arguments: {{text: '{{"id": "said", "content": "{{{{ inputs.word }}}}"}}'}}
    target: hypotheses
    output: {{id: "{{{{ item.id }}}}", content: "{{{{ item.content }}}}"}}
"""


def _running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def _none_left(marker: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while _running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize(("executor", "workers"), [("local", 4), ("process", 2)])
def test_a_batch_starts_each_server_once_per_worker(
    tmp_path: Path, executor: str, workers: int
) -> None:
    marker = str(tmp_path / f"pool-{executor}")
    pipeline = tmp_path / "pooled.yaml"
    pipeline.write_text(
        PIPELINE.format(
            python=json.dumps(sys.executable), fixture=json.dumps(str(FIXTURE)), marker=marker
        )
    )
    words = [f"w{i}" for i in range(8)]
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": w} for w in words])
    out = tmp_path / "results.jsonl"
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["run", str(pipeline), "--cases", str(cases), "--out", str(out)]
    argv += ["--executor", executor, "--concurrency", str(workers)]
    code = cli(argv, stdout, stderr)
    assert code == 0, stderr.getvalue()
    lines = read_results(out)
    assert sorted(line["facts"]["hypotheses"][0]["content"] for line in lines) == sorted(words)
    starts = Path(marker + ".starts").read_text().splitlines()
    assert 1 <= len(starts) <= (1 if executor == "local" else workers) < len(words)
    assert _none_left(marker)


def test_a_server_that_failed_is_started_afresh_for_the_next_run(tmp_path: Path) -> None:
    marker = str(tmp_path / "pool-crash")
    spec = StdioServerSpec(
        name="fixture",
        command=(sys.executable, str(FIXTURE), "stdio", "0", marker),
        allow=("echo", "crash"),
    )
    pool = ServerPool()

    async def one_run(tool: str) -> str:
        loan = pool.lend(spec, tmp_path, {})
        try:
            await asyncio.to_thread(loan.start)
            try:
                return (await loan.call(tool, {"text": "hi"} if tool == "echo" else {})).text
            except ToolFailure as failure:
                return failure.code
        finally:
            loan.close()

    try:
        assert asyncio.run(one_run("echo")) == "hi"
        assert asyncio.run(one_run("echo")) == "hi"
        assert pool.starts == 1
        assert asyncio.run(one_run("crash")) == "CD965"
        assert asyncio.run(one_run("echo")) == "hi"
        assert pool.starts == 2
    finally:
        pool.close()
    assert len(Path(marker + ".starts").read_text().splitlines()) == 2
    assert _none_left(marker)
