"""`serve --executor process|ray`: the API's promises hold when runs execute on workers.

The main flows of test_app.py run again over real HTTP against a server whose
runs execute on two worker processes (the test functions are imported here,
so they use this module's `served`); the crash test kills such a server
with SIGKILL and checks that its workers died with it and that every run
finished exactly once after the restart (test_executor_ray.py: on a local Ray).
A server stopped (SIGTERM) while a run is in its tool call ends that run before
its worker stops the tool server, and the run finishes from its journal at the
next start, without a tool failure.
"""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from converge_dsl.cli import run as cli
from converge_dsl.serve._store import STATE_FILE
from tests.batch.test_one_workers import lines, slow_tool

from .conftest import DATA, Server, post_load, serve_with_token, settled, until
from .test_app import (
    EXPECTED,
    MARKET,
    TOKEN,
    test_a_lowered_budget_is_the_runs,
    test_cancel_a_paused_run,
    test_cancel_a_running_run,
    test_events_stream_and_resume_with_last_event_id,
    test_pause_decision_resume,
    test_report_is_the_html_report_of_the_run,
    test_start_and_wait_answers_the_run_result,
)

__all__ = [
    "test_a_lowered_budget_is_the_runs",
    "test_cancel_a_paused_run",
    "test_cancel_a_running_run",
    "test_events_stream_and_resume_with_last_event_id",
    "test_pause_decision_resume",
    "test_report_is_the_html_report_of_the_run",
    "test_start_and_wait_answers_the_run_result",
]


@pytest.fixture
def served(tmp_path: Path, servers: list[Server]) -> tuple[str, dict[str, str]]:
    """test_app.py's server, its runs on two worker processes."""
    server = serve_with_token(
        tmp_path, servers, [DATA, MARKET], TOKEN, "--executor", "process", "--processes", "2"
    )
    return server.ready(), {"Authorization": f"Bearer {TOKEN}"}


def _children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.add(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


RUNS = 120
GATED = 6


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table in /proc")
def test_a_killed_server_takes_its_workers_and_every_run_ends_once(
    tmp_path: Path, servers: list[Server]
) -> None:
    state = tmp_path / "state"
    paths = [DATA / "steady.yaml", DATA / "gated.yaml"]
    options = ("--workers", "8", "--queue", "1000", "--executor", "process", "--processes", "2")
    server = Server(paths, state, *options)
    servers.append(server)
    url = server.ready()
    ids = post_load(url, RUNS, GATED)
    for share in (0.25, 0.6):
        until(lambda share=share: settled(state) >= RUNS * share, 120)
        workers = _children(server.process.pid)
        assert len(workers) >= 2  # the two workers (and multiprocessing's resource tracker)
        server.kill()
        until(lambda workers=workers: not any(_alive(p) for p in workers), 10)  # no orphan
        server = Server(paths, state, *options)
        servers.append(server)
        url = server.ready()
    until(lambda: settled(state) == RUNS, 180)
    with sqlite3.connect(state / STATE_FILE) as db:
        statuses = dict(db.execute("SELECT id, status FROM runs").fetchall())
        attempts = dict(db.execute("SELECT id, attempts FROM runs").fetchall())
        results: dict[str, list[str]] = {}
        for run, body in db.execute("SELECT run, body FROM results"):
            results.setdefault(run, []).append(body)
        journals = {r for (r,) in db.execute("SELECT DISTINCT run FROM checkpoint_records")}
    assert len(statuses) == RUNS
    for run, what in ids.items():
        if what == "gated":
            assert statuses[run] == "paused"
            assert run in journals  # its records, committed by a worker, wait for a decision
            continue
        assert statuses[run] == "done"
        assert len(results[run]) == 1, run  # exactly once
        assert f'"content": "run {what}"' in results[run][0]
        assert run not in journals  # deleted with its result
    assert max(attempts.values()) >= 2  # some runs were cut short and continued
    gated = [run for run, what in ids.items() if what == "gated"]
    with httpx.Client(base_url=url, timeout=30) as http:
        for run in gated:  # resumed on whichever worker, from the journal in the database
            assert http.post(f"/v1/runs/{run}/decisions", json={"approve": ["s1", "s2"]}).is_success
        until(lambda: all(http.get(f"/v1/runs/{r}").json()["status"] == "done" for r in gated), 60)
        finished = http.get(f"/v1/runs/{gated[0]}").json()
    assert [f["id"] for f in finished["result"]["facts"]["strategies"]] == ["s1", "s2"]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table in /proc")
def test_a_worker_that_dies_mid_run_has_its_run_queued_again(
    tmp_path: Path, servers: list[Server]
) -> None:
    server = Server(
        [DATA / "slow.yaml"],
        tmp_path / "state",
        "--executor",
        "process",
        "--processes",
        "1",
    )
    servers.append(server)
    url = server.ready()
    (worker,) = [p for p in _children(server.process.pid) if "spawn_main" in _cmdline(p)]
    with httpx.Client(base_url=url, timeout=30) as http:
        run = http.post("/v1/pipelines/slow/runs").json()["id"]
        until(lambda: http.get(f"/v1/runs/{run}").json()["status"] == "running", 20)
        time.sleep(0.3)  # inside its 3-second model call
        os.kill(worker, signal.SIGKILL)
        until(lambda: http.get(f"/v1/runs/{run}").json()["status"] == "done", 60)
        body = http.get(f"/v1/runs/{run}").json()
    assert body["stop_reason"] == "converged", body["result"]["diagnostics"]
    assert body["attempts"] == 2  # queued again, on the worker started in its place
    assert body["result"]["facts"]["notes"][0]["content"] == "done waiting"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table in /proc")
def test_a_run_whose_worker_dies_three_times_fails_with_cd434(
    tmp_path: Path, servers: list[Server]
) -> None:
    server = Server(
        [DATA / "slow.yaml"], tmp_path / "state", "--executor", "process", "--processes", "1"
    )
    servers.append(server)
    url = server.ready()
    with httpx.Client(base_url=url, timeout=30) as http:
        run = http.post("/v1/pipelines/slow/runs").json()["id"]
        resume: dict[str, str] = {}  # from the first event, then after the last one read
        for _ in range(3):
            # Each attempt's run_started event: it runs on the worker, in its model call.
            events = http.stream("GET", f"/v1/runs/{run}/events", headers=resume)
            with events as stream:
                for line in stream.iter_lines():
                    if line.startswith("id: "):
                        resume = {"Last-Event-ID": line[4:]}
                    if '"type":"run_started"' in line:
                        break
            (worker,) = [p for p in _children(server.process.pid) if "spawn_main" in _cmdline(p)]
            os.kill(worker, signal.SIGKILL)
        until(lambda: http.get(f"/v1/runs/{run}").json()["status"] == "done", 60)
        body = http.get(f"/v1/runs/{run}").json()
    (diagnostic,) = body["result"]["diagnostics"]
    assert body["stop_reason"] == "error"
    assert diagnostic["code"] == "CD434"
    assert diagnostic["message"] == (
        "serve: the run was lost 3 times: the worker process running it died (exit code -9)"
    )
    assert diagnostic["hint"].endswith("or serve with --executor local")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("ray_address_alone", ["--ray-address", "127.0.0.1:6379"]),
        ("processes_alone", ["--processes", "2"]),
        ("run_threads_alone", ["--executor", "process", "--run-threads", "2"]),
        ("ray_unreachable", ["--executor", "ray", "--ray-address", "127.0.0.1:1"]),
    ],
)
def test_executor_errors_name_the_option_and_the_fix(
    name: str, options: list[str], tmp_path: Path
) -> None:
    if name == "ray_unreachable":
        pytest.importorskip("ray")
    out, err = io.StringIO(), io.StringIO()
    args = ["serve", str(DATA / "echo.yaml"), "--port", "0", "--state", str(tmp_path), *options]
    code = cli(args, out, err)
    text = f"exit {code}\n{err.getvalue()}"
    expected = EXPECTED / f"executor_{name}.txt"
    if os.environ.get("UPDATE_EXPECTED") == "1":  # rewrites it: read the diff
        expected.write_text(text, encoding="utf-8")
    assert text == expected.read_text(encoding="utf-8")


@pytest.mark.parametrize(("options", "threads"), [([], 1), (["--run-threads", "3"], 3)])
def test_run_threads_sets_the_threads_of_the_local_executor(
    options: list[str], threads: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import converge_dsl.serve

    served: list[Any] = []
    monkeypatch.setattr(converge_dsl.serve, "serve", lambda given, _: served.append(given))
    args = ["serve", str(DATA / "echo.yaml"), "--port", "0", "--state", str(tmp_path), *options]
    out, err = io.StringIO(), io.StringIO()
    assert cli(args, out, err) == 0, err.getvalue()
    (given,) = served
    assert given.executor.threads == threads


@pytest.mark.parametrize("executor", ["process", "ray"])
def test_a_stopped_server_ends_a_run_before_its_tool_server_and_finishes_it_at_restart(
    tmp_path: Path, servers: list[Server], executor: str
) -> None:
    if executor == "ray":
        pytest.importorskip("ray", reason="the `ray` extra is not installed")
    pipeline, marker = slow_tool(tmp_path, 3)
    state = tmp_path / "state"
    options = ("--executor", executor, "--processes", "1", "--wait-timeout", "60")
    server = Server([pipeline], state, *options)
    servers.append(server)
    with httpx.Client(base_url=server.ready(), timeout=30) as http:
        run = http.post("/v1/pipelines/tool/runs").json()["id"]
        until(lambda: bool(lines(Path(f"{marker}.calls"))), 60)
    server.stop()
    assert server.exit_code() == 0, "".join(server.stderr)
    assert lines(Path(f"{marker}.stopped")) == lines(Path(f"{marker}.starts"))
    with sqlite3.connect(state / STATE_FILE) as db:
        (status,) = db.execute("SELECT status FROM runs WHERE id = ?", (run,)).fetchone()
    assert status == "running"  # left for the next start, as after a crash
    server = Server([pipeline], state, *options)
    servers.append(server)
    with httpx.Client(base_url=server.ready(), timeout=30) as http:
        until(lambda: http.get(f"/v1/runs/{run}").json()["status"] == "done", 90)
        body = http.get(f"/v1/runs/{run}").json()
        events = http.get(f"/v1/runs/{run}/events").text
    assert body["attempts"] == 2
    assert body["stop_reason"] == "converged", body["result"]["diagnostics"]
    assert not body["result"]["diagnostics"]
    assert body["result"]["facts"]["hypotheses"][0]["content"] == "hello"
    assert '"type":"suggestor_failed"' not in events
