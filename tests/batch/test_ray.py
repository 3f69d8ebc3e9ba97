"""The `ray` executor on a local Ray instance the test starts (`ray.init(num_cpus=2)`)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from converge_dsl.cli import run as cli

from .conftest import ECHO, read_results, write_cases

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install '.[ray]')")


def _batch(cases: Path, out: Path, *extra: str) -> int:
    args = ["run", str(ECHO), "--cases", str(cases), "--out", str(out), *extra]
    return cli(args, io.StringIO(), io.StringIO())


def test_ray_gives_the_same_results_as_local(local_ray: None, tmp_path: Path) -> None:
    cases = write_cases(
        tmp_path / "cases.jsonl",
        [{"id": i, "word": w} for i, w in enumerate(["a", "slow", "boom", "b", "not-json"])],
    )
    with cases.open("a") as handle:
        handle.write("[1]\n")
    local, on_ray = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    assert _batch(cases, local) == 1
    assert _batch(cases, on_ray, "--executor", "ray", "--concurrency", "4") == 1
    assert read_results(on_ray) == read_results(local)
    assert len(read_results(on_ray)) == 6


def test_ray_shares_the_batch_cap(local_ray: None, tmp_path: Path) -> None:
    """Exactly the cap: each case reserves its one call from the pool actor, and the
    pool's spent plus held calls never go down while cases run (a settled call moves
    from held to spent in one step), so exactly three reservations are granted."""
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"w{i}"} for i in range(8)])
    out = tmp_path / "results.jsonl"
    _batch(cases, out, "--executor", "ray", "--concurrency", "4", "--max-model-calls", "3")
    lines = read_results(out)
    assert len(lines) == 8
    assert sum(line["usage"]["model_calls"] for line in lines) == 3


def test_ray_writes_each_case_trace_and_report_on_the_driver_paths(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative `--trace`/`--report` paths mean the driver's folder, not an actor's."""
    monkeypatch.chdir(tmp_path)
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": w} for w in ("a", "b")])
    code = _batch(
        cases, tmp_path / "r.jsonl", "--executor", "ray", "--trace", "traces", "--report", "R.html"
    )
    assert code == 0
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["0.jsonl", "1.jsonl"]
    assert sorted(p.name for p in (tmp_path / "R").iterdir()) == ["0.html", "1.html"]
    assert '<a href="R/1.html">1</a>' in (tmp_path / "R.html").read_text(encoding="utf-8")


def test_ray_runs_cases_with_their_own_models(local_ray: None, tmp_path: Path) -> None:
    from converge_dsl.batch import BatchOptions, Case, ModelOverride, run_cases

    (tmp_path / "other.script.yaml").write_text(
        'apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: "said it otherwise"}\n'
    )
    models = {
        "default": ModelOverride({"adapter": "scripted", "script": "other.script.yaml"}, tmp_path)
    }
    options = BatchOptions(pipeline=ECHO, cases=ECHO, out=tmp_path / "unused", executor="ray")
    cases = [Case(i, i, {"word": "tea"}, models=models if i % 2 else None) for i in range(4)]
    results = sorted(run_cases(options, cases), key=lambda r: r.index)
    answers = [r.body["facts"]["hypotheses"][0]["content"] for r in results]
    assert answers == ["said it", "said it otherwise"] * 2
    assert all(r.seconds > 0 for r in results)


def test_an_evaluation_on_ray_gives_the_local_scores(local_ray: None, tmp_path: Path) -> None:
    from tests.pipetest.test_eval_configurations import _folder

    path = _folder(tmp_path)

    def evaluate(*extra: str) -> str:
        out = io.StringIO()
        cli(["eval", str(path), "--format", "json", "--no-timings", *extra], out, io.StringIO())
        return out.getvalue()

    assert evaluate("--executor", "ray", "--concurrency", "2") == evaluate()


def test_ray_records_each_case_into_its_cassette_and_replays_it_offline(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Relative `--record`/`--replay` folders mean the driver's folder, not an actor's."""
    import shutil

    monkeypatch.chdir(tmp_path)
    for name in ("echo.yaml", "echo.script.yaml"):
        shutil.copy(ECHO.parent / name, tmp_path / name)
    cases = write_cases(tmp_path / "cases.jsonl", [{"id": f"c/{w}", "word": w} for w in "ab"])
    pipeline = str(tmp_path / "echo.yaml")

    def batch(out: str, *extra: str) -> int:
        args = ["run", pipeline, "--cases", str(cases), "--out", out, "--executor", "ray"]
        return cli([*args, *extra], io.StringIO(), io.StringIO())

    assert batch("a.jsonl", "--record", "tapes") == 0
    assert sorted(p.name for p in (tmp_path / "tapes").iterdir()) == ["c%2Fa.jsonl", "c%2Fb.jsonl"]
    (tmp_path / "echo.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: changed}\n"
    )
    assert batch("b.jsonl", "--replay", "tapes") == 0
    assert read_results(tmp_path / "b.jsonl") == read_results(tmp_path / "a.jsonl")


STOPPING = Path(__file__).resolve().parent / "stopping_server.py"

TOOL_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: with-a-tool
inputs:
  word: {{default: hello}}
tools:
  stopping:
    command: [{python}, {server}, {marker}]
    allow: [echo]
seeds: [{{id: go, content: go}}]
suggestors:
  - name: shout
    kind: tool
    call: mcp:stopping/echo
    dependencies: [seeds]
    arguments: {{text: '{{"id": "said", "content": "{{{{ inputs.word }}}}"}}'}}
    target: hypotheses
    output: {{id: "{{{{ item.id }}}}", content: "{{{{ item.content }}}}"}}
"""


def _pids(path: Path) -> set[int]:
    return {int(line) for line in path.read_text().split()} if path.exists() else set()


def test_ray_actors_stop_their_tool_servers_before_they_end(
    local_ray: None, tmp_path: Path
) -> None:
    """A batch on Ray, then the service's Ray workers: each actor's stdio tool server is
    asked to stop (SIGTERM, which it writes down) before the actor is killed, and none
    is left running once the batch has returned or the workers are closed."""
    from converge_dsl.batch import OneRun, RayWorkers, load

    marker = tmp_path / "server"
    pipeline = tmp_path / "tool.yaml"
    pipeline.write_text(
        TOOL_PIPELINE.format(
            python=json.dumps(sys.executable),
            server=json.dumps(str(STOPPING)),
            marker=json.dumps(str(marker)),
        )
    )
    cases = write_cases(tmp_path / "cases.jsonl", [{"word": f"w{i}"} for i in range(4)])
    out, err = io.StringIO(), io.StringIO()
    argv = ["run", str(pipeline), "--cases", str(cases), "--out", str(tmp_path / "r.jsonl")]
    assert cli([*argv, "--executor", "ray", "--concurrency", "4"], out, err) == 0, err.getvalue()
    started = _pids(Path(f"{marker}.starts"))
    assert started
    assert _pids(Path(f"{marker}.stopped")) == started
    assert not [pid for pid in started if _alive(pid)]

    workers = RayWorkers({"tool": load(pipeline)}, tmp_path / "db.sqlite3", 1, None)
    workers.start()
    try:
        ticket = workers.submit(OneRun("r", "tool", {"word": "x"}, tmp_path / "db.sqlite3"))
        assert ticket.future.result(timeout=60).status == "done"
    finally:
        workers.close()
    served = _pids(Path(f"{marker}.starts")) - started
    assert len(served) == 1
    assert _pids(Path(f"{marker}.stopped")) - started == served
    assert not [pid for pid in served if _alive(pid)]


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
