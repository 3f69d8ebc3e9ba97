"""A Ray batch and batch processes at the same time on one answer cache folder.

`fakellm` (a real OpenAI-compatible server on 127.0.0.1 that counts the requests each of
its rules answered) knows `TOPICS` topics, one rule each, answering "answer N" to a prompt
holding `<topic N>`. A cheap pipeline asks it once per case (one `llm` suggestor). Three
batches of the same cases, over the same cache folder, run at once: `--executor ray` in
this process (2 actors), `--executor process` and `--executor local` each in a process of
its own. Then:
- every case's answer is its own topic's (never another key's);
- the store holds exactly one entry per topic, each passing its check, and no batch warned
  (a row failing its check is a warning, CD974: none in any standard error or Ray log);
- the requests that reached the server are one per topic plus the documented race (two
  callers missing one key at the same moment both call): at most one per caller in flight,
  and each topic answered at least once.

`CONVERGE_DSL_SHARED_CACHE_CASES` sets the number of Ray cases (default 2,000; each process
batch runs half as many): about a minute on two loaded cores, most of it Ray's start-up and
the 4,000 runs; `python bench/cache_share.py [CASES]` runs it alone and prints its figures.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from converge_dsl.cli import run as cli
from converge_dsl.models.answer_store import SqliteAnswerStore, verify

from ..models._fakellm import running_fakellm
from .conftest import read_results, write_cases

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install '.[ray]')")
pytest.importorskip("fakellm", reason="fakellm (the `dev` extra) is not installed")

TOPICS = 100
CASES = int(os.environ.get("CONVERGE_DSL_SHARED_CACHE_CASES", "2000"))
RAY_CONCURRENCY, PROCESS_WORKERS, LOCAL_CONCURRENCY = 8, 2, 8
IN_FLIGHT = RAY_CONCURRENCY + PROCESS_WORKERS + LOCAL_CONCURRENCY

RULES = json.dumps(
    {
        "version": 1,
        "rules": [
            {
                "name": f"t{n}",
                "when": {"messages_contain": f"<topic {n}>"},
                "respond": {"content": f"answer {n}"},
            }
            for n in range(TOPICS)
        ],
    }
)

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: topics
inputs: {{topic: {{description: the topic number}}}}
models:
  remote:
    adapter: openai
    base_url: "{url}/v1"
    model: gpt-4o-mini
    accounts: [{{name: main, api_key_env: SHARED_CACHE_KEY}}]
seeds:
  - {{id: start, content: go}}
suggestors:
  - name: ask
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "Name <topic {{{{ inputs.topic }}}}>"}}
    output: {{format: text, id: said}}
"""


def _argv(pipeline: Path, cases: Path, out: Path, folder: Path, *extra: str) -> list[str]:
    flags = ["--cache", "--cache-dir", str(folder), "--format", "json", *extra]
    return ["run", str(pipeline), "--cases", str(cases), "--out", str(out), *flags]


def _ray_log_warnings() -> list[str]:
    """Lines of this Ray session's worker logs (an actor's standard error) with a cache
    warning."""
    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    return [
        line
        for path in logs.glob("worker-*")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
        if "CD974" in line
    ]


def test_ray_and_processes_share_one_cache(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARED_CACHE_KEY", "sk-shared-cache-0123456789")
    monkeypatch.delenv("CONVERGE_DSL_CACHE_MODE", raising=False)
    folder = tmp_path / "answers"
    with running_fakellm(tmp_path, RULES) as url:
        pipeline = tmp_path / "topics.yaml"
        pipeline.write_text(PIPELINE.format(url=url), encoding="utf-8")
        cases = {
            name: write_cases(
                tmp_path / f"{name}.jsonl",
                [{"id": f"{name}-{i}", "topic": i % TOPICS} for i in range(count)],
            )
            for name, count in (("ray", CASES), ("process", CASES // 2), ("local", CASES // 2))
        }
        others = {
            name: subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "converge_dsl",
                    *_argv(pipeline, cases[name], tmp_path / f"{name}.out.jsonl", folder, *extra),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, extra in (
                ("process", ("--executor", "process", "--concurrency", str(PROCESS_WORKERS))),
                ("local", ("--executor", "local", "--concurrency", str(LOCAL_CONCURRENCY))),
            )
        }
        started = time.monotonic()
        out, err = io.StringIO(), io.StringIO()
        ray_argv = _argv(
            pipeline,
            cases["ray"],
            tmp_path / "ray.out.jsonl",
            folder,
            "--executor",
            "ray",
            "--concurrency",
            str(RAY_CONCURRENCY),
        )
        ends: dict[str, float] = {}
        finished: dict[str, tuple[int, str, str]] = {}

        def wait(name: str, process: subprocess.Popen[str]) -> None:
            stdout, stderr = process.communicate(timeout=600)
            ends[name] = time.monotonic()
            finished[name] = (process.returncode, stdout, stderr)

        waiters = [threading.Thread(target=wait, args=item) for item in others.items()]
        for waiter in waiters:
            waiter.start()
        code = cli(ray_argv, out, err)
        ends["ray"] = time.monotonic()
        for waiter in waiters:
            waiter.join(timeout=600)
        stats = httpx.get(f"{url}/_fakellm/stats", timeout=5).json()
    assert code == 0, err.getvalue() + out.getvalue()
    assert "CD974" not in err.getvalue()
    for returncode, _, stderr in finished.values():
        assert returncode == 0, stderr
        assert "warning" not in stderr, stderr  # no entry failed its check
    assert _ray_log_warnings() == []
    # Every answer is its own topic's.
    for name in ("ray", "process", "local"):
        lines = read_results(tmp_path / f"{name}.out.jsonl")
        assert len(lines) == len(cases[name].read_text().splitlines())
        for line in lines:
            n = int(str(line["id"]).rsplit("-", 1)[1]) % TOPICS
            assert line["facts"]["hypotheses"][0]["content"] == f"answer {n}", line["id"]
    # One verified entry per topic.
    store = SqliteAnswerStore(folder)
    rows = store.rows()
    store.close()
    assert len(rows) == TOPICS
    assert all(verify(row) is None for row in rows)
    # Calls: one per topic plus the race, never more than one per caller in flight.
    by_rule = {str(k): int(v) for k, v in stats["by_rule"].items()}
    assert set(by_rule) == {f"t{n}" for n in range(TOPICS)}
    assert all(1 <= count <= IN_FLIGHT for count in by_rule.values())
    calls = sum(by_rule.values())
    all_cases = CASES * 2
    summaries = [json.loads(out.getvalue())] + [json.loads(f[1]) for f in finished.values()]
    assert sum(s["model_calls"] for s in summaries) == calls
    assert sum(s["cached_calls"] for s in summaries) == all_cases - calls
    # The three batches ran at the same time: each ran its cases (from its end less the
    # seconds its summary counts) while the others did.
    seconds = dict(zip(("ray", *finished), (s["seconds"] for s in summaries), strict=True))
    spans = {name: (ends[name] - seconds[name] - started, ends[name] - started) for name in ends}
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())
    print(
        f"\n{all_cases} cases ({CASES} on Ray, {CASES // 2} in processes, {CASES // 2} local) "
        f"over {TOPICS} keys: {calls} requests reached the server ({calls - TOPICS} through "
        "the race); batches ran (s from the start): "
        + ", ".join(f"{name} {a:.1f}-{b:.1f}" for name, (a, b) in sorted(spans.items()))
    )
