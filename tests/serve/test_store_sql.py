"""The state's schema: a state an older server made is taken over without a number
it may have sent being given again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from converge_dsl.serve import RunStore
from converge_dsl.serve._store import STATE_FILE
from converge_dsl.serve._store_sql import OLDER_SERVER_MARGIN

# The tables of the release before `sent` that this test reads or writes.
_OLDER = """
CREATE TABLE runs (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, pipeline TEXT NOT NULL,
    request TEXT NOT NULL, status TEXT NOT NULL, stop_reason TEXT, decisions TEXT,
    result TEXT, attempts INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL,
    updated REAL NOT NULL);
CREATE TABLE events (run TEXT NOT NULL, seq INTEGER NOT NULL, line TEXT NOT NULL,
    PRIMARY KEY (run, seq));
CREATE TABLE recoveries (run TEXT PRIMARY KEY, first_unstored INTEGER NOT NULL);
"""


def _older_state(folder: Path) -> None:
    """An older server's state, killed: `killed` was running (9 events stored, more
    maybe sent), `again` was continued once after a kill (its `recoveries` row) and
    killed again, `done` ended, `waiting` never started, `paused` paused."""
    folder.mkdir()
    with sqlite3.connect(folder / STATE_FILE) as db:
        db.executescript(_OLDER)
        for seq, (run, status, attempts) in enumerate(
            [
                ("killed", "running", 1),
                ("again", "queued", 2),
                ("done", "done", 1),
                ("waiting", "queued", 0),
                ("paused", "paused", 1),
            ]
        ):
            db.execute(
                "INSERT INTO runs (id, seq, pipeline, request, status, attempts, created, "
                "updated) VALUES (?, ?, 'p', '{}', ?, ?, 1.0, 1.0)",
                (run, seq + 1, status, attempts),
            )
            if attempts:
                db.execute("INSERT INTO events VALUES (?, 0, ?)", (run, "\n".join(["{}"] * 5)))
                db.execute("INSERT INTO events VALUES (?, 5, ?)", (run, "\n".join(["{}"] * 4)))
        db.execute("INSERT INTO recoveries VALUES ('again', 6)")


def test_an_older_server_s_unended_runs_number_their_events_past_what_it_may_have_sent(
    tmp_path: Path,
) -> None:
    """The older server sent events it had not stored (and, continuing a run after a
    restart, gave their numbers again): a run it left unended goes on numbering past
    its stored events and `OLDER_SERVER_MARGIN`; the others number as they did."""
    state = tmp_path / "state"
    _older_state(state)
    store = RunStore(state)
    assert store.stored_past("killed") == 9
    assert store.next_event("killed") == 9 + OLDER_SERVER_MARGIN
    assert store.next_event("again") == 9 + OLDER_SERVER_MARGIN
    assert [store.next_event(run) for run in ("done", "waiting", "paused")] == [9, 0, 9]
    store.close()
    with sqlite3.connect(state / STATE_FILE) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert "recoveries" not in tables
    again = RunStore(state)  # opened again: nothing taken over twice
    assert again.next_event("killed") == 9 + OLDER_SERVER_MARGIN
    again.mark_sent("killed", 12 + OLDER_SERVER_MARGIN)
    again.close()
    assert RunStore(state).next_event("killed") == 12 + OLDER_SERVER_MARGIN


def test_a_pause_notes_its_events_sent_exactly(tmp_path: Path) -> None:
    """A stream notes numbers ahead of what it sends; the pause, which stores every
    event of the attempt, brings the mark back to the number past them, and a stream
    writing its mark after the pause writes none: the next attempt skips no number."""
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0)
    store.start("a", 1.0)
    store.mark_sent("a", 70)
    assert store.next_event("a") == 70
    events = [(n, "{}") for n in range(6)]
    assert store.finish(
        "a", status="paused", stop_reason="hitl_pause", body={}, events=events, now=2.0
    )
    assert store.next_event("a") == 6
    store.mark_sent("a", 134)  # a stream late on the pause
    assert store.next_event("a") == 6


def test_an_end_notes_its_events_sent_exactly(tmp_path: Path) -> None:
    """A stream notes numbers ahead of what it sends; the end, which stores the attempt's
    last events, brings the mark back to the number past them (a finished run gives no
    number past its last event: CD462 from there), by `finish` as by `finish_later`; an
    end with no event of its own (a run ended from `queued`) keeps the mark."""
    store = RunStore(tmp_path)
    for run, later in (("a", False), ("b", True)):
        store.add(run, "p", {}, 1.0)
        store.start(run, 1.0)
        store.mark_sent(run, 70)
        events = [(n, "{}") for n in range(6)]
        if later:
            ending = store.finish_later(
                run, status="done", stop_reason="converged", body={}, events=events, now=2.0
            )
            assert ending.result(timeout=10)
        else:
            assert store.finish(
                run, status="done", stop_reason="converged", body={}, events=events, now=2.0
            )
        assert store.next_event(run) == 6
        store.mark_sent(run, 134)  # a stream late on the end
        assert store.next_event(run) == 6
    store.add("c", "p", {}, 1.0)
    store.start("c", 1.0)
    store.mark_sent("c", 70)
    store.requeue("c", 2.0)
    assert store.finish(
        "c", status="done", stop_reason="failed", body={}, events=[], now=3.0, was=("queued",)
    )
    assert store.next_event("c") == 70
    store.close()
