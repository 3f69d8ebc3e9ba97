"""One run on a worker (`execute_one`): its messages in order, its journal, its budget."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from converge_dsl.batch import OneRun, RunEnd, execute_one, load, open_journals
from converge_dsl.batch._one import (
    CheckpointKeys,
    Flight,
    Relayed,
    RunTicket,
    SpansKnown,
    SpansSent,
)
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
    with pytest.raises(ConvergeError, match=r"^\[CD999\] a worker cannot open the checkpoint"):
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


def _runs(pipeline: Path, jobs: list[OneRun], **worker: Any) -> list[list[tuple[Any, ...]]]:
    """The messages of each of `jobs`, run one after the other as one worker runs them."""
    loaded = load(pipeline)
    journals = open_journals(jobs[0].journal)
    out: list[list[tuple[Any, ...]]] = []

    async def each() -> None:
        for job in jobs:
            sent: list[tuple[Any, ...]] = []
            await execute_one(loaded, job, sent.append, journals, **worker)
            out.append(sent)

    try:
        asyncio.run(each())
    finally:
        journals[0].close()
    return out


def test_a_worker_sends_a_compiled_pipeline_once_and_its_reader_makes_it_whole(
    tmp_path: Path,
) -> None:
    database = tmp_path / "db.sqlite3"
    jobs = [OneRun(f"r{n}", "echo", {"text": "hi"}, database) for n in range(3)]
    runs = _runs(SERVE / "echo.yaml", jobs, sent=SpansSent())
    compiled = [next(m for m in sent if m[0] == "compiled") for sent in runs]
    assert len(compiled[0]) == 6  # spans, kinds, sources and their number
    assert compiled[1] == ("compiled", "r1", compiled[0][5])  # the number alone
    assert compiled[2] == ("compiled", "r2", compiled[0][5])
    known = SpansKnown()
    whole = [known.full(message) for message in compiled]
    assert whole[0] == compiled[0][:5]
    assert [message[1] for message in whole] == ["r0", "r1", "r2"]
    # the very same mappings for every run: a sink finds what it made of them by identity
    assert all(message[2] is whole[0][2] and message[4] is whole[0][4] for message in whole)
    assert "echo" in str(whole[2][4])


def test_a_worker_without_spans_sent_sends_the_whole_compiled_pipeline_each_run(
    tmp_path: Path,
) -> None:
    database = tmp_path / "db.sqlite3"
    jobs = [OneRun(f"r{n}", "echo", {"text": "hi"}, database) for n in range(2)]
    for sent in _runs(SERVE / "echo.yaml", jobs):
        compiled = next(m for m in sent if m[0] == "compiled")
        assert len(compiled) == 5
        assert SpansKnown().full(compiled) == compiled


def test_spans_known_keeps_the_latest_numbers_a_worker_may_name() -> None:
    known = SpansKnown()
    for number in range(70):
        known.full(("compiled", f"r{number}", {"a": number}, {}, {}, number))
    assert known.full(("compiled", "x", 69))[2] == {"a": 69}
    assert known.full(("compiled", "x", 6))[2] == {"a": 6}
    with pytest.raises(KeyError):
        known.full(("compiled", "x", 5))  # a worker's `SpansSent` forgot it too


class _Encoded(NamedTuple):
    kind: str
    text: str


def _named_tuple(event: Any) -> _Encoded:
    return _Encoded(type(event).__name__, "x")


def test_an_encoding_that_is_a_named_tuple_travels_as_a_tuple_and_is_made_again(
    tmp_path: Path,
) -> None:
    heard: list[Any] = []

    class Heard(RunSink):
        listens = True

        def on_event(self, event: Any) -> None:
            heard.append(event)

    job = OneRun("t", "echo", {"text": "x"}, tmp_path / "db.sqlite3", encode=_named_tuple)
    sent = _run(job, SERVE / "echo.yaml")
    events = [m for m in sent if m[0] == "event"]
    assert all(type(m[2]) is tuple and m[3] is _Encoded for m in events)
    relayed = Relayed([Heard()])
    for message in sent:
        relayed.deliver(message)
    assert heard[0] == _Encoded("RunStarted", "x")
    assert all(type(event) is _Encoded for event in heard)
    assert len(heard) == len(events)


def test_a_worker_reads_the_checkpoint_key_once_per_pipeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is read at the pipeline's first run on the worker and kept (as the service
    keeps its own): a later run neither reads the file again nor needs it."""
    from converge_dsl.runtime import checkpoint_key

    monkeypatch.setenv("CONVERGE_DSL_CONFIG_DIR", str(tmp_path / "config"))
    database = tmp_path / "db.sqlite3"
    loaded = load(SERVE / "echo.yaml")
    keys = CheckpointKeys()
    first = keys.of(loaded)
    assert first == checkpoint_key(loaded.env)
    (tmp_path / "config" / "checkpoint.key").write_text("not a key\n")
    assert keys.of(loaded) == first
    journals = open_journals(database)
    sent: list[tuple[Any, ...]] = []
    try:
        job = OneRun("k", "echo", {"text": "x"}, database)
        asyncio.run(execute_one(loaded, job, sent.append, journals, keys=keys))
    finally:
        journals[0].close()
    assert sent[-1][2].status == "done"


def test_a_key_that_cannot_be_read_fails_the_run_and_is_read_again_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGE_DSL_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "config").mkdir()
    key_file = tmp_path / "config" / "checkpoint.key"
    key_file.write_text("not a key\n")
    key_file.chmod(0o600)
    database = tmp_path / "db.sqlite3"
    jobs = [OneRun(f"k{n}", "echo", {"text": "x"}, database) for n in range(2)]
    keys = CheckpointKeys()
    failed = _runs(SERVE / "echo.yaml", jobs[:1], keys=keys)[0][-1][2]
    assert failed.status == "failed"
    assert "CD954" in str(failed.body)
    key_file.unlink()  # made anew at the next run
    assert _runs(SERVE / "echo.yaml", jobs[1:], keys=keys)[0][-1][2].status == "done"


def test_a_one_run_pickles_whole_as_a_worker_receives_it(tmp_path: Path) -> None:
    import pickle

    job = OneRun(
        "p",
        "echo",
        {"text": "x"},
        tmp_path / "db.sqlite3",
        budget={"max_wall_s": 5.0},
        resume=True,
        decisions={"s1": True},
        decided_by="http",
        encode=_named,
    )
    again = pickle.loads(pickle.dumps(job, pickle.HIGHEST_PROTOCOL))
    assert again == job
    assert isinstance(again.journal, Path)
    assert pickle.loads(pickle.dumps(OneRun("q", "echo", {}, tmp_path))) == OneRun(
        "q", "echo", {}, tmp_path
    )
