"""Worker processes that execute single runs: events as they happen, cancel, start failures."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.batch import OneRun, ProcessWorkers, RunEnd, RunWorkers, WorkerError, load
from converge_dsl.runtime import RunSink
from tests.serve.conftest import until

from .conftest import records

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
        match=r"^\[CD999\] a worker process could not start: a worker cannot open the checkpoint ",
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


STOPPING = Path(__file__).resolve().parent / "stopping_server.py"

# One tool suggestor whose call takes `seconds` (`stopping_server.py`'s `echo_after`).
SLOW_TOOL = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: {name}
inputs:
  word: {{default: hello}}
tools:
  stopping:
    command: [{python}, {server}, {marker}, "{linger}"]
    allow: [echo_after]
    call_timeout_s: {timeout}
seeds: [{{id: go, content: go}}]
suggestors:
  - name: shout
    kind: tool
    call: mcp:stopping/echo_after
    dependencies: [seeds]
    arguments:
      text: '{{"id": "said", "content": "{{{{ inputs.word }}}}"}}'
      seconds: {seconds}
    target: hypotheses
    output: {{id: "{{{{ item.id }}}}", content: "{{{{ item.content }}}}"}}
"""


def slow_tool(
    folder: Path, seconds: float, name: str = "tool", *, linger: float = 0, timeout: float = 60
) -> tuple[Path, Path]:
    """The pipeline `name` of `SLOW_TOOL` in `folder`, its calls cut at `timeout` seconds,
    and its tool server's marker (the server ends `linger` seconds after it is stopped)."""
    marker = folder / f"{name}-server"
    pipeline = folder / f"{name}.yaml"
    pipeline.write_text(
        SLOW_TOOL.format(
            name=name,
            linger=linger,
            timeout=timeout,
            python=json.dumps(sys.executable),
            server=json.dumps(str(STOPPING)),
            marker=json.dumps(str(marker)),
            seconds=seconds,
        )
    )
    return pipeline, marker


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def resumed(workers: RunWorkers, database: Path) -> tuple[RunEnd, list[str]]:
    """The end of run `t` of `slow_tool`'s pipeline on `workers`, continued from its
    journal in `database` (afresh when it has none, as the service does), and the names
    of the events it made."""
    with contextlib.closing(sqlite3.connect(database)) as db:
        found = db.execute("SELECT 1 FROM checkpoint_records WHERE run = 't'").fetchone()
    sink = Events()
    job = OneRun("t", "tool", {}, database, resume=found is not None)
    end = workers.submit(job, [sink]).future.result(timeout=60)
    return end, [name for name, _ in sink.heard]


def finishes_cleanly(workers: RunWorkers, database: Path) -> None:
    """Run `t` of `slow_tool`'s pipeline, continued on `workers` (started here, closed
    after), ends done with its fact and no tool failure."""
    workers.start()
    try:
        end, heard = resumed(workers, database)
    finally:
        workers.close()
    assert end.status == "done"
    assert end.body is not None
    assert not end.body["diagnostics"], end.body["diagnostics"]
    assert end.body["facts"]["hypotheses"][0]["content"] == "hello"
    assert "diagnostic" not in end.body["facts"]  # no tool error
    assert "SuggestorFailed" not in heard


def test_closed_workers_cancel_a_run_in_flight_before_they_stop_its_tool_server(
    tmp_path: Path,
) -> None:
    """A run in its tool call when the workers close ends `lost` (it continues from its
    journal) and hears no failure: it is cancelled, and has ended, before the pipeline
    stops the tool server (SIGTERM, which the server writes down)."""
    pipeline, marker = slow_tool(tmp_path, 3)
    database = tmp_path / "db.sqlite3"
    workers = ProcessWorkers({"tool": load(pipeline)}, database, 1)
    workers.start()
    sink = Events()
    try:
        ticket = workers.submit(OneRun("t", "tool", {}, database), [sink])
        until(lambda: lines(Path(f"{marker}.calls")), 30)
    finally:
        workers.close()
    end = ticket.future.result(timeout=10)
    assert (end.status, end.message) == ("lost", "the workers were closed while it ran")
    assert "SuggestorFailed" not in [name for name, _ in sink.heard]
    assert lines(Path(f"{marker}.stopped")) == lines(Path(f"{marker}.starts"))
    finishes_cleanly(ProcessWorkers({"tool": load(pipeline)}, database, 1), database)


def closed_after_a_checkpoint(workers: RunWorkers, database: Path) -> RunEnd:
    """The end of a `slow` run on `workers` (started), closed as soon as the run's first
    checkpoint record was queued, within the group commit's wait (50 ms)."""
    import threading

    checkpointed = threading.Event()
    try:
        job = OneRun("k", "slow", {}, database)
        ticket = workers.submit(job, on_checkpoint=checkpointed.set)
        assert checkpointed.wait(60)
    finally:
        workers.close()
    return ticket.future.result(timeout=10)


def test_closed_workers_keep_the_journal_records_of_a_run_in_flight(tmp_path: Path) -> None:
    """A run cancelled because the workers close continues from its journal at the next
    start: its records queued for the group commit are committed, not dropped as a
    cancelled run's are (it would repeat the cycles they hold)."""
    database = tmp_path / "db.sqlite3"
    workers = ProcessWorkers({"slow": load(SERVE / "slow.yaml")}, database, 1)
    workers.start()
    end = closed_after_a_checkpoint(workers, database)
    assert (end.status, end.message) == ("lost", "the workers were closed while it ran")
    assert records(database, "k") == 1


def test_frames_reads_what_connection_send_wrote_a_buffer_at_a_time() -> None:
    """Objects that came together are taken in one read, one longer than a read waits
    for the rest, and the pipe's end is `EOFError`."""
    import multiprocessing

    from converge_dsl.batch._pipes import Frames

    here, there = multiprocessing.Pipe(duplex=True)
    big = "x" * 200_000  # more than one read
    sent = [("event", "r:0", "a"), ["burst", 1, 2], ("end", "r:0", big), ("after",)]
    for item in sent[:2]:
        there.send(item)
    frames = Frames()
    assert frames.read(here.fileno()) == sent[:2]  # one read for both
    for item in sent[2:]:
        there.send(item)
    got: list[object] = []
    while len(got) < 2:
        got.extend(frames.read(here.fileno()))
    assert got == sent[2:]
    there.close()
    with pytest.raises(EOFError):
        frames.read(here.fileno())
    here.close()


class _Holder:
    """What `_fork_a_holder` leaves in the worker's pipelines: nothing to close."""

    def close(self) -> None:
        pass


def _fork_a_holder(pid_file: str) -> _Holder:
    """Unpickled in a worker: fork a child that holds every descriptor the worker has (its
    pipe's end, its sentinel) and outlives it, as a solver's child could."""
    import os

    child = os.fork()
    if child == 0:  # pragma: no cover - the child only sleeps
        time.sleep(60)
        os._exit(0)
    Path(pid_file).write_text(str(child))
    return _Holder()


class _ForksAHolder:
    def __init__(self, pid_file: Path) -> None:
        self.pid_file = str(pid_file)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_fork_a_holder, (self.pid_file,))


def test_a_worker_killed_while_its_child_holds_its_pipe_ends_its_runs_lost(
    tmp_path: Path,
) -> None:
    """The death of a worker is seen by its process, not by its pipe's end: a child it forked
    keeps that end (and the worker's sentinel) open."""
    import os
    import signal

    pipelines: dict[str, Any] = {"slow": load(SERVE / "slow.yaml")}
    pid_file = tmp_path / "holder.pid"
    pipelines["holder"] = _ForksAHolder(pid_file)
    started = ProcessWorkers(pipelines, tmp_path / "db.sqlite3", 1)
    started.start()
    try:
        ticket = started.submit(OneRun("s", "slow", {}, tmp_path / "db.sqlite3"))
        (worker,) = started.pids()
        until(pid_file.exists, 10)
        time.sleep(0.5)  # the run is under way
        os.kill(worker, signal.SIGKILL)
        end = ticket.future.result(timeout=20)
        assert end.status == "lost"
        assert "died" in end.message
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
        started.close()
