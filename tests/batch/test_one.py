"""One run on a worker (`execute_one`): its messages in order, its journal, its budget."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.batch import OneRun, RunEnd, execute_one, load, open_journals
from converge_dsl.batch._one import Flight, Relayed, RunTicket
from converge_dsl.errors import ConvergeError
from converge_dsl.runtime import RunSink

from .conftest import records

SERVE = Path(__file__).parents[1] / "serve" / "data"


def _run(job: OneRun, pipeline: Path) -> list[tuple[Any, ...]]:
    sent: list[tuple[Any, ...]] = []
    journals = open_journals(job.journal)
    try:
        asyncio.run(execute_one(load(pipeline), job, sent.append, journals))
    finally:
        journals[0].close()
    return sent


def test_a_run_sends_its_hooks_then_its_end(tmp_path: Path) -> None:
    job = OneRun("r1", "echo", {"text": "hi"}, tmp_path / "db.sqlite3")
    sent = _run(job, SERVE / "echo.yaml")
    kinds = [message[0] for message in sent]
    assert kinds[:2] == ["open", "compiled"]
    assert kinds[-1] == "end"
    assert {"event", "checkpoint"} <= set(kinds)
    assert all(message[1] == "r1" for message in sent)
    end = sent[-1][2]
    assert isinstance(end, RunEnd)
    assert (end.status, end.body and end.body["stop_reason"]) == ("done", "converged")
    assert records(job.journal, "r1") == 0  # a run that ended leaves its journal unwritten


def _named(event: Any) -> tuple[str, str]:
    return ("encoded", type(event).__name__)


def test_a_run_asked_with_encode_sends_each_event_as_encode_made_it(tmp_path: Path) -> None:
    job = OneRun("r1", "echo", {"text": "hi"}, tmp_path / "db.sqlite3", encode=_named)
    sent = _run(job, SERVE / "echo.yaml")
    events = [message[2] for message in sent if message[0] == "event"]
    assert events[0] == ("encoded", "RunStarted")
    assert all(event[0] == "encoded" for event in events)
    assert len(events) > 3
    assert sent[-1][2].status == "done"


def test_a_pause_commits_its_journal_and_resumes_from_it_with_decisions(tmp_path: Path) -> None:
    database = tmp_path / "db.sqlite3"
    paused = _run(OneRun("g", "gated", {}, database), SERVE / "gated.yaml")[-1][2]
    assert paused.body["stop_reason"] == "hitl_pause"
    assert records(database, "g") >= 1  # committed before the end was sent
    job = OneRun("g", "gated", {}, database, resume=True, decisions={"s1": True, "s2": False})
    sent = _run(job, SERVE / "gated.yaml")
    done = sent[-1][2]
    assert done.body["stop_reason"] == "converged"
    assert [f["id"] for f in done.body["facts"]["strategies"]] == ["s1"]
    decided = [m[2] for m in sent if m[0] == "event" and type(m[2]).__name__ == "ProposalDecided"]
    assert [(e.id, e.by) for e in decided] == [("s1", "api"), ("s2", "api")]


def test_the_budget_lowers_the_pipelines(tmp_path: Path) -> None:
    job = OneRun("b", "slow", {}, tmp_path / "db.sqlite3", budget={"max_model_calls": 0})
    end = _run(job, SERVE / "slow.yaml")[-1][2]
    assert end.body["stop_reason"] == "model_call_budget_exhausted"
    assert end.body["usage"]["model_calls"] == 0


def test_a_cancelled_run_sends_cancelled(tmp_path: Path) -> None:
    job = OneRun("c", "slow", {}, tmp_path / "db.sqlite3")
    sent: list[tuple[Any, ...]] = []
    journals = open_journals(job.journal)

    async def cancelled() -> None:
        task = asyncio.ensure_future(
            execute_one(load(SERVE / "slow.yaml"), job, sent.append, journals)
        )
        while not any(m[0] == "event" for m in sent):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(asyncio.wait_for(cancelled(), 20))
    finally:
        journals[0].close()
    assert sent[-1] == ("end", "c", RunEnd("cancelled"))


def test_relayed_plays_the_messages_back_on_sinks(tmp_path: Path) -> None:
    heard: list[str] = []

    class Heard(RunSink):
        listens = True

        def open(self, clock: object) -> None:
            heard.append("open")

        def on_compiled(self, compiled: Any, sources: Any) -> None:
            heard.append(f"compiled {sorted(compiled.spans)}")

        def on_event(self, event: Any) -> None:
            heard.append(type(event).__name__)

        def close(self) -> None:
            heard.append("close")

    checkpoints: list[int] = []
    relayed = Relayed([Heard()], lambda: checkpoints.append(1))
    sent = _run(OneRun("e", "echo", {"text": "x"}, tmp_path / "db.sqlite3"), SERVE / "echo.yaml")
    ends = [relayed.deliver(message) for message in sent]
    assert ends[-1] == sent[-1][2]
    assert not any(ends[:-1])
    assert heard[0] == "open"
    assert heard[1].startswith("compiled [")
    assert heard[2] == "RunStarted"
    assert heard[-1] == "close"
    assert checkpoints


def test_a_database_that_cannot_be_opened_is_cd999(tmp_path: Path) -> None:
    with pytest.raises(ConvergeError, match=r"^CD999: a worker cannot open the checkpoint"):
        open_journals(tmp_path)  # a folder, not a database


def test_a_run_cut_by_a_close_still_plays_back_its_events_and_checkpoints(
    tmp_path: Path,
) -> None:
    """The worker may commit a record after the close began: the events that go with it
    are stored (by the caller's `on_checkpoint`), so no gap is left in the run's events.
    Only its end becomes `lost`."""
    heard: list[str] = []

    class Heard(RunSink):
        listens = True

        def on_event(self, event: Any) -> None:
            heard.append(type(event).__name__)

    checkpoints: list[int] = []
    sent = _run(OneRun("e", "echo", {"text": "x"}, tmp_path / "db.sqlite3"), SERVE / "echo.yaml")
    flight = Flight(RunTicket("e"), Relayed([Heard()], lambda: checkpoints.append(1)))
    flight.cut("closed")
    assert all(flight.deliver(message) for message in sent)
    assert heard == [type(m[2]).__name__ for m in sent if m[0] == "event"]
    assert len(checkpoints) == [m[0] for m in sent].count("checkpoint") > 0
    assert flight.ticket.future.result(timeout=0) == RunEnd("lost", message="closed")
