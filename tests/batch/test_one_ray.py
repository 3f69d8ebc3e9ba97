"""`RayWorkers` on a local Ray the test starts: closing them with a run in its tool call
cancels the run before the actor stops its tool servers, so the run continues cleanly
from its journal; an actor that dies is started again in its place, and the runs sent
meanwhile wait for it (test_ray.py: Ray batches, and that the servers stop)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from converge_dsl.batch import OneRun, load

from .conftest import records
from .test_one_workers import (
    SERVE,
    Events,
    closed_after_a_checkpoint,
    finishes_cleanly,
    lines,
    slow_tool,
    until,
)

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install '.[ray]')")


def test_closed_actors_cancel_a_run_in_flight_before_they_stop_its_tool_server(
    local_ray: None, tmp_path: Path
) -> None:
    """The actor also holds two pipelines whose tool servers take two seconds each to
    stop. Were the run's tool server stopped under it first, its call would hang until
    its 2.5-second `call_timeout_s` (CD964) while those stop, and the run would end
    `done`, converged, with that tool error among its facts."""
    from converge_dsl.batch import RayWorkers

    pipeline, marker = slow_tool(tmp_path, 1.5, timeout=2.5)
    lingering = {
        name: load(slow_tool(tmp_path, 0, name, linger=10)[0]) for name in ("first", "second")
    }
    database = tmp_path / "db.sqlite3"
    workers = RayWorkers({"tool": load(pipeline), **lingering}, database, 1, None)
    workers.start()
    sink = Events()
    try:
        for name in lingering:  # their tool servers started
            started = workers.submit(OneRun(name, name, {}, database))
            assert started.future.result(timeout=60).status == "done"
        ticket = workers.submit(OneRun("t", "tool", {}, database), [sink])
        until(lambda: lines(Path(f"{marker}.calls")), 60)
    finally:
        workers.close()
    end = ticket.future.result(timeout=10)
    assert [name for name, _ in sink.heard][-1] == "SuggestorStarted", end  # no call ended
    assert (end.status, end.message) == ("lost", "the workers were closed while it ran")
    assert lines(Path(f"{marker}.stopped")) == lines(Path(f"{marker}.starts"))
    finishes_cleanly(RayWorkers({"tool": load(pipeline)}, database, 1, None), database)


def test_an_actor_that_dies_is_started_again_in_its_place(local_ray: None, tmp_path: Path) -> None:
    from converge_dsl.batch import RayWorkers

    database = tmp_path / "db.sqlite3"
    pipelines = {name: load(SERVE / f"{name}.yaml") for name in ("echo", "slow")}
    workers = RayWorkers(pipelines, database, 1, None)
    workers.start()
    try:
        sink = Events()
        killed = workers.submit(OneRun("s", "slow", {}, database), [sink])
        until(lambda: sink.heard, 60)  # in its model call
        (pid,) = workers.pids()
        os.kill(pid, signal.SIGKILL)
        # Sent before Ray saw the actor die, they wait for it instead of ending lost at
        # once, without having run.
        sent = [OneRun(f"e{n}", "echo", {"text": "x"}, database) for n in range(3)]
        tickets = [workers.submit(job) for job in sent]
        assert killed.future.result(timeout=30).status == "lost"
        ends = [ticket.future.result(timeout=60) for ticket in tickets]
    finally:
        workers.close()
    assert [end.status for end in ends] == ["done"] * 3, ends


def test_closed_actors_keep_the_journal_records_of_a_run_in_flight(
    local_ray: None, tmp_path: Path
) -> None:
    """As worker processes do (test_one_workers.py)."""
    from converge_dsl.batch import RayWorkers

    database = tmp_path / "db.sqlite3"
    workers = RayWorkers({"slow": load(SERVE / "slow.yaml")}, database, 1, None)
    workers.start()
    end = closed_after_a_checkpoint(workers, database)
    assert (end.status, end.message) == ("lost", "the workers were closed while it ran")
    assert records(database, "k") == 1
