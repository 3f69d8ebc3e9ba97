"""Worker processes that execute single runs: events as they happen, cancel, start failures."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.batch import OneRun, ProcessWorkers, WorkerError, load
from converge_dsl.runtime import RunSink

SERVE = Path(__file__).parents[1] / "serve" / "data"


class Events(RunSink):
    """The names of the events it hears, with the time each came."""

    listens = True

    def __init__(self) -> None:
        self.heard: list[tuple[str, float]] = []

    def on_event(self, event: Any) -> None:
        self.heard.append((type(event).__name__, time.monotonic()))


@pytest.fixture
def workers(tmp_path: Path) -> Any:
    pipelines = {name: load(SERVE / f"{name}.yaml") for name in ("echo", "slow")}
    started = ProcessWorkers(pipelines, tmp_path / "db.sqlite3", 2)
    started.start()
    try:
        yield started
    finally:
        started.close()


def test_runs_on_workers_stream_their_events_before_they_end(
    workers: ProcessWorkers, tmp_path: Path
) -> None:
    sink, checkpoints = Events(), []
    job = OneRun("s", "slow", {}, tmp_path / "db.sqlite3")
    ticket = workers.submit(job, [sink], lambda: checkpoints.append(1))
    echo = workers.submit(OneRun("e", "echo", {"text": "x"}, tmp_path / "db.sqlite3"))
    assert echo.future.result(timeout=30).body["stop_reason"] == "converged"
    end = ticket.future.result(timeout=30)
    ended = time.monotonic()
    assert end.status == "done"
    assert end.body["facts"]["notes"][0]["content"] == "done waiting"
    assert sink.heard[0][0] == "RunStarted"
    assert ended - sink.heard[0][1] > 2  # heard while its 3-second model call went on
    assert checkpoints


def test_a_cancelled_run_on_a_worker_ends_cancelled(
    workers: ProcessWorkers, tmp_path: Path
) -> None:
    sink = Events()
    ticket = workers.submit(OneRun("c", "slow", {}, tmp_path / "db.sqlite3"), [sink])
    deadline = time.monotonic() + 20
    while not sink.heard:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    workers.cancel("c")
    assert ticket.future.result(timeout=10).status == "cancelled"


def test_a_worker_that_cannot_start_is_cd999(tmp_path: Path) -> None:
    workers = ProcessWorkers({"echo": load(SERVE / "echo.yaml")}, tmp_path, 1)  # a folder
    with pytest.raises(
        WorkerError,
        match=r"^CD999: a worker process could not start: a worker cannot open the checkpoint ",
    ):
        workers.start()
    assert workers.pids()
    assert not any(Path(f"/proc/{p}").exists() for p in workers.pids())


class Failing(RunSink):
    """A sink that fails on the first event it hears."""

    listens = True

    def on_event(self, event: Any) -> None:
        raise OSError("no space left")


def test_a_failed_sink_abandons_the_attempt_and_a_new_one_is_not_disturbed(
    workers: ProcessWorkers, tmp_path: Path
) -> None:
    job = OneRun("f", "slow", {}, tmp_path / "db.sqlite3")
    first = workers.submit(job, [Failing()]).future.result(timeout=30)
    assert first.status == "lost"
    assert first.message == "a sink of the run failed: OSError('no space left')"
    sink = Events()
    again = workers.submit(job, [sink]).future.result(timeout=30)  # the abandoned one is cancelled
    assert again.status == "done", again.body and again.body["diagnostics"]
    assert [name for name, _ in sink.heard].count("RunStarted") == 1
