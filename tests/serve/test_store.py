"""The SQLite state: a run ends once; a restart queues what was running, keeps what paused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from converge_dsl.serve import RunStore
from converge_dsl.serve._errors import ServeFailed
from converge_dsl.serve._store import STATE_FILE


def test_a_run_ends_exactly_once(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("a", "p", {"inputs": {"x": 1}}, 1.0)
    assert store.start("a", 2.0)
    assert not store.start("a", 2.0)  # a second worker finds it taken
    assert store.finish(
        "a", status="done", stop_reason="converged", body={"facts": {}}, events=[(0, "{}")], now=3.0
    )
    assert not store.finish(
        "a", status="done", stop_reason="converged", body={"facts": {}}, events=[], now=4.0
    )
    assert store.results("a") == [{"facts": {}}]
    row = store.get("a")
    assert row is not None
    assert (row.status, row.stop_reason, row.attempts) == ("done", "converged", 1)
    assert list(store.events("a")) == [(0, "{}")]


def test_recover_queues_running_runs_and_keeps_paused_ones(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for run in ("a", "b", "c", "d"):
        store.add(run, "p", {}, 1.0)
    store.start("a", 2.0)
    store.start("b", 2.0)
    store.finish(
        "b",
        status="paused",
        stop_reason="hitl_pause",
        body={"pending": [{"id": "s1"}]},
        events=[],
        now=3.0,
    )
    store.close()
    again = RunStore(tmp_path)
    assert [row.id for row in again.recover(4.0)] == ["a", "c", "d"]
    assert again.results("b") == []  # a pause is not an end
    paused = again.get("b")
    assert paused is not None
    assert paused.status == "paused"
    assert paused.result == {"pending": [{"id": "s1"}]}
    assert again.decide("b", {"s1": True}, 5.0)
    assert not again.decide("b", {"s1": True}, 5.0)
    decided = again.get("b")
    assert decided is not None
    assert decided.decisions == {"s1": True}


def test_cancel_only_what_waits(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0)
    store.add("b", "p", {}, 1.0)
    store.start("b", 2.0)
    assert store.cancel("a", 3.0)
    assert not store.cancel("b", 3.0)  # running: its task is cancelled instead
    assert not store.start("a", 4.0)


def test_events_continue_numbering(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0)
    assert store.next_event("a") == 0
    store.add_events("a", [(0, "x"), (1, "y")])
    assert store.next_event("a") == 2
    assert list(store.events("a", 0)) == [(1, "y")]


def test_the_state_is_wal(tmp_path: Path) -> None:
    RunStore(tmp_path).close()
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_unusable_state_is_cd993(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ServeFailed, match=r"serve \[CD993\]: cannot open the state"):
        RunStore(tmp_path / "file")
