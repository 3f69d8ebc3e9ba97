"""The SQLite state: a run ends once; a restart queues what was running, keeps what paused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from converge_dsl.serve import RunStore
from converge_dsl.serve._errors import ServeFailed
from converge_dsl.serve._store import STATE_FILE, StateError


def test_a_run_ends_exactly_once(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    store.add("a", "p", {"inputs": {"x": 1}}, 1.0)
    started = store.start("a", 2.0)
    assert started is not None
    assert started == store.get("a")  # the run as it now stands, read with the update
    assert (started.status, started.attempts, started.updated) == ("running", 1, 2.0)
    assert started.request == {"inputs": {"x": 1}}
    assert store.start("a", 2.0) is None  # a second worker finds it taken
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


def test_the_result_of_a_run_that_ended_is_stored_once(tmp_path: Path) -> None:
    """An end's result is its row of `results` only (the run's row reads it from
    there); a run an older server ended, its result in both, reads the same."""
    store = RunStore(tmp_path)
    for run in ("a", "old"):
        store.add(run, "p", {}, 1.0)
        store.start(run, 1.0)
        store.finish(
            run, status="done", stop_reason="converged", body={"n": run}, events=[], now=2.0
        )
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        db.execute("UPDATE runs SET result = '{\"n\": \"old\"}' WHERE id = 'old'")
        kept = dict(db.execute("SELECT id, result FROM runs").fetchall())
    assert kept == {"a": None, "old": '{"n": "old"}'}
    for run in ("a", "old"):
        row = store.get(run)
        assert row is not None
        assert row.result == {"n": run}
        assert store.results(run) == [{"n": run}]
    assert [row.result for row in store.runs("done")] == [{"n": "a"}, {"n": "old"}]


def test_a_run_started_from_the_run_as_added_is_the_run_as_stored(tmp_path: Path) -> None:
    """`add` answers the run as stored; starting from it reads nothing back and gives the
    run `get` reads; a run no longer queued is not started from it."""
    store = RunStore(tmp_path)
    added = store.add("a", "p", {"inputs": {"x": [1, 2]}}, 1.0)
    assert added == store.get("a")
    started = store.start("a", 2.0, queued=added)
    assert started is not None
    assert started == store.get("a")
    assert started.request == {"inputs": {"x": [1, 2]}}
    assert store.start("a", 3.0, queued=added) is None


def test_recover_drops_the_journals_of_runs_never_stored(tmp_path: Path) -> None:
    """A worker may commit records of a run whose add was still queued when the server was
    killed, and a run's events may be flushed before it: at the next start they go; a
    stored run keeps its own."""
    store = RunStore(tmp_path)
    store.add("kept", "p", {}, 1.0, running=True)
    store.close()
    db = sqlite3.connect(tmp_path / "runs.sqlite3")
    with db:
        for run in ("kept", "lost"):
            db.execute("INSERT INTO checkpoint_records VALUES (?, 0, ?)", (run, b"{}"))
            db.execute("INSERT INTO checkpoint_decisions VALUES (?, ?)", (run, b"{}"))
            db.execute("INSERT INTO events VALUES (?, 0, ?)", (run, "record"))
    db.close()
    again = RunStore(tmp_path)
    assert [row.id for row in again.recover(2.0)] == ["kept"]
    for table in ("checkpoint_records", "checkpoint_decisions", "events"):
        rows = again.checkpoints.query(f"SELECT run FROM {table}")
        assert rows == [("kept",)]
    again.close()


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
    # queued again: the pause's stop reason and result are no longer the run's
    assert (decided.status, decided.stop_reason, decided.result) == ("queued", None, None)
    started = again.start("b", 6.0)
    assert started is not None
    assert (started.status, started.stop_reason, started.result) == ("running", None, None)


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


def test_the_events_handed_over_together_are_one_row_read_back_one_by_one(
    tmp_path: Path,
) -> None:
    """A run's records handed over together (a flush, the rest with its end) are one row
    each; reading from any number, inside a row or past a row written by an older
    server (one record a row), gives every later record, numbered."""
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0)
    store.start("a", 1.0)
    with sqlite3.connect(tmp_path / STATE_FILE) as db:  # an older server's row
        db.execute("INSERT INTO events (run, seq, line) VALUES ('a', 0, '\"old\"')")
    store.add_events("a", [(1, "b"), (2, "c"), (3, "d")])
    assert store.next_event("a") == 4
    store.finish(
        "a", status="done", stop_reason="converged", body={}, events=[(4, "e"), (5, "f")], now=2
    )
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        rows = db.execute("SELECT seq FROM events WHERE run = 'a' ORDER BY seq").fetchall()
    assert rows == [(0,), (1,), (4,)]
    every = [(0, '"old"'), (1, "b"), (2, "c"), (3, "d"), (4, "e"), (5, "f")]
    for after in range(-1, 7):
        assert list(store.events("a", after)) == every[after + 1 :], after
    assert store.next_event("a") == 6


def test_the_state_is_wal(tmp_path: Path) -> None:
    RunStore(tmp_path).close()
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_an_unusable_state_is_cd993(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ServeFailed, match=r"^\[CD993\] serve: cannot open the state"):
        RunStore(tmp_path / "file")


def _ended(store: RunStore, run: str, at: float, status: str = "done") -> None:
    store.add(run, "p", {}, at)
    store.start(run, at)
    body = {"pending": [{"id": "s1"}]} if status == "paused" else {"facts": {}}
    reason = "hitl_pause" if status == "paused" else "converged"
    store.finish(run, status=status, stop_reason=reason, body=body, events=[(0, "{}")], now=at)


def test_prune_keeps_the_newest_finished_runs_and_every_paused_one(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    for n in range(5):
        _ended(store, f"r{n}", float(n))
    _ended(store, "held", 0.0, status="paused")
    store.add("waiting", "p", {}, 0.0)
    assert sorted(store.prune(keep=2, before=None)) == ["r0", "r1", "r2"]
    assert [row.id for row in store.runs()] == ["r3", "r4", "held", "waiting"]
    assert list(store.events("r0")) == []
    assert store.results("r0") == []
    assert store.prune(keep=2, before=None) == []
    assert store.prune(keep=None, before=3.5) == ["r3"]


def test_a_large_backlog_is_pruned_in_bounded_transactions(tmp_path: Path) -> None:
    """1,203 finished runs past the limit go in three transactions of at most 500 runs
    (not one per run), with every row they had; the paused run and the newest stay."""
    RunStore(tmp_path).close()  # the tables; the store, the one writer, opens after the backlog
    with sqlite3.connect(tmp_path / STATE_FILE) as db:  # the backlog, written at once
        db.executemany(
            "INSERT INTO runs (id, seq, pipeline, request, status, stop_reason, created, "
            "updated) VALUES (?, ?, 'p', '{}', 'done', 'converged', ?, ?)",
            [(f"r{n:04d}", n, float(n), float(n)) for n in range(1205)],
        )
        db.executemany(
            "INSERT INTO events (run, seq, line) VALUES (?, 0, '{}')",
            [(f"r{n:04d}",) for n in range(1205)],
        )
        db.executemany(
            "INSERT INTO results (run, body, at) VALUES (?, '{}', 0)",
            [(f"r{n:04d}",) for n in range(1205)],
        )
        db.executemany(
            "INSERT INTO idempotency (key, digest, run) VALUES (?, 'd', ?)",
            [(f"k{n}", f"r{n:04d}") for n in range(1205)],
        )
    store = RunStore(tmp_path)
    _ended(store, "held", 0.0, status="paused")
    transactions: list[str] = []
    store._db.set_trace_callback(  # the store's own connection: what it really runs
        lambda sql: transactions.append(sql) if sql.startswith("BEGIN") else None
    )
    gone = store.prune(keep=2, before=None)
    store._db.set_trace_callback(None)
    assert gone == [f"r{n:04d}" for n in range(1203)]
    assert len(transactions) == 3
    assert [row.id for row in store.runs()] == ["r1203", "r1204", "held"]
    with sqlite3.connect(tmp_path / STATE_FILE) as db:
        for table in ("events", "results", "idempotency"):
            query = f"SELECT COUNT(*) FROM {table} WHERE run >= 'r' AND run < 'r1203'"
            assert db.execute(query).fetchone() == (0,), table
    assert store.idempotent("k1204") == ("d", "r1204")


def test_the_service_applies_the_retention_on_its_clock(tmp_path: Path) -> None:
    """`--retention-days 1`, looked at every hour of a fake clock: a run that ended a day
    before the clock's time goes; a newer one and a paused one stay."""
    import asyncio

    from converge_dsl.clock import FakeClock
    from converge_dsl.serve import Limits, Retention, RunService

    clock = FakeClock()
    start = clock.wall().timestamp()
    store = RunStore(tmp_path)
    _ended(store, "old", start)
    _ended(store, "held", start, status="paused")
    _ended(store, "new", start + 20 * 3600)
    service = RunService(
        {},
        store,
        tmp_path,
        Limits(),
        clock=clock,
        new_id=lambda: "x",
        redact=str,
        retention=Retention(days=1, every_s=3600),
    )

    async def main() -> None:
        await service.start()
        try:
            for _ in range(10_000):  # bounded: each turn of the task sleeps an hour
                if len(clock.sleeps) >= 30:
                    break
                await asyncio.sleep(0)
        finally:
            await service.stop()

    asyncio.run(main())
    assert 30 <= len(clock.sleeps) < 40
    assert set(clock.sleeps) == {3600}
    assert [row.id for row in store.runs()] == ["held", "new"]


def test_a_run_s_life_uses_no_sql_newer_than_sqlite_3_31(tmp_path: Path) -> None:
    """`RETURNING` came with SQLite 3.35; a Python linked to an older one (3.31 on
    Ubuntu 20.04) must still start runs. Every statement the store runs is traced."""
    store = RunStore(tmp_path)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    store.add("a", "p", {}, 1.0)
    started = store.start("a", 2.0)
    store.finish("a", status="done", stop_reason="converged", body={}, events=[], now=3.0)
    store._db.set_trace_callback(None)
    assert started is not None
    assert (started.status, started.attempts) == ("running", 1)
    assert statements
    assert not [sql for sql in statements if "RETURNING" in sql.upper()]


def test_a_failing_database_is_a_state_error_from_every_write(tmp_path: Path) -> None:
    """A closed connection stands for a database that fails: each write says CD993
    instead of letting sqlite3's own error escape."""
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0)
    store.checkpoints.close()
    store._db.close()
    writes = {
        "start": lambda: store.start("a", 2.0),
        "decide": lambda: store.decide("a", {"s1": True}, 2.0),
        "requeue": lambda: store.requeue("a", 2.0),
        "cancel": lambda: store.cancel("a", 2.0),
        "add_events": lambda: store.add_events("a", [(0, "{}")]),
        "finish": lambda: store.finish(
            "a", status="done", stop_reason="converged", body={}, events=[], now=2.0
        ),
        "add": lambda: store.add("b", "p", {}, 2.0),
    }
    refused = []
    for name, write in writes.items():
        with pytest.raises(StateError, match=r"cannot write the state"):
            write()
        refused.append(name)
    assert refused == list(writes)


def test_a_transaction_that_fails_midway_is_rolled_back(tmp_path: Path) -> None:
    """The result's insert fails after the run was marked done: the run is still running,
    nothing of the transaction stays, and the connection is usable again."""
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0)
    store.start("a", 2.0)
    store._db.execute(
        "CREATE TEMP TRIGGER full BEFORE INSERT ON results BEGIN "
        "SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    with pytest.raises(StateError, match=r"cannot write the state: database or disk is full"):
        store.finish("a", status="done", stop_reason="converged", body={}, events=[], now=3.0)
    assert not store._db.in_transaction
    row = store.get("a")
    assert row is not None
    assert row.status == "running"
    store._db.execute("DROP TRIGGER temp.full")
    assert store.finish("a", status="done", stop_reason="converged", body={}, events=[], now=4.0)
    assert store.results("a") == [{}]


def test_an_end_in_the_group_commit_is_told_once_that_group_is_committed(
    tmp_path: Path,
) -> None:
    """`finish_later` shares the journals' group commit: nothing is written, nor told,
    before the group commits; then the run is done with its result and events, its
    journal gone, and a second end of it is refused as `finish` refuses it."""
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0, running=True)
    journal = store.checkpoints.journal("a")
    journal.replace(b"record\n")
    journal.flush()
    commits: list[str] = []
    store._db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    ending = store.finish_later(
        "a", status="done", stop_reason="converged", body={"n": 1}, events=[(0, "{}")], now=2.0
    )
    assert ending.result(timeout=5) is True
    assert commits == ["COMMIT"]  # the group's commit, the end's own
    row = store.get("a")
    assert row is not None
    assert (row.status, row.result) == ("done", {"n": 1})
    assert list(store.events("a")) == [(0, "{}")]
    assert not store.checkpoints.exists("a")
    again = store.finish_later(
        "a", status="done", stop_reason="converged", body={}, events=[], now=3.0
    )
    assert again.result(timeout=5) is False
    assert store.results("a") == [{"n": 1}]
    store.close()


def test_an_end_waits_for_no_window_of_the_records_queued_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group holding an end (which its waiters are answered after) is committed at
    once, even when the records queued before it would wait longer: here an hour,
    which the test would wait out otherwise."""
    from converge_dsl.runtime import _checkpoint_sqlite

    monkeypatch.setattr(_checkpoint_sqlite, "GROUP_COMMIT_S", 3600.0)
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0, running=True)
    store.add("b", "p", {}, 1.0, running=True)
    store.checkpoints.journal("b").replace(b"record of a run still going\n")
    ending = store.finish_later(
        "a", status="done", stop_reason="converged", body={"n": 1}, events=[], now=2.0
    )
    try:
        assert ending.result(timeout=60) is True
        assert store.checkpoints.query("SELECT run FROM checkpoint_records") == [("b",)]
    finally:
        store.close()


def test_an_end_queued_is_written_with_the_records_queued_before_it(tmp_path: Path) -> None:
    """A pause's last records and the pause go in the same group; an end that fails is
    told as a state error."""
    store = RunStore(tmp_path)
    store.add("a", "p", {}, 1.0, running=True)
    store.checkpoints.journal("a").replace(b"last\n")
    paused = store.finish_later(
        "a", status="paused", stop_reason="hitl_pause", body={"p": 1}, events=[], now=2.0
    )
    assert paused.result(timeout=5) is True
    assert store.checkpoints.journal("a").read() == b"last\n"
    store.add("b", "p", {}, 1.0, running=True)
    store._db.execute(
        "CREATE TEMP TRIGGER full BEFORE INSERT ON results BEGIN "
        "SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    failed = store.finish_later(
        "b", status="done", stop_reason="converged", body={}, events=[], now=3.0
    )
    with pytest.raises(StateError, match=r"cannot write the state: database or disk is full"):
        failed.result(timeout=5)
    row = store.get("b")
    assert row is not None
    assert row.status == "running"  # rolled back: a restart continues it


def test_an_end_that_fails_in_a_group_fails_alone_and_later_runs_end(tmp_path: Path) -> None:
    """A trigger refuses one run's result (a disk full for a moment): that end is told
    CD993 and undone, while the other run's journal records queued in the same group are
    committed; once the trigger is gone, two more runs end, and the journals keep no
    error."""
    store = RunStore(tmp_path)
    for run in "abcd":
        store.add(run, "p", {}, 1.0, running=True)
    store._db.execute(
        "CREATE TEMP TRIGGER full BEFORE INSERT ON results BEGIN "
        "SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    with store._lock:  # one group: the group commit waits for the lock
        store.checkpoints.journal("b").replace(b"record of b\n")
        failed = store.finish_later(
            "a", status="done", stop_reason="converged", body={}, events=[], now=2.0
        )
    with pytest.raises(StateError, match=r"cannot write the state: database or disk is full"):
        failed.result(timeout=5)
    assert store.checkpoints.query("SELECT line FROM checkpoint_records WHERE run = 'b'") == [
        (b"record of b\n",)
    ]
    store._db.execute("DROP TRIGGER temp.full")
    ended = [
        store.finish_later(
            run, status="done", stop_reason="converged", body={"run": run}, events=[], now=3.0
        )
        for run in "cd"
    ]
    assert [ending.result(timeout=5) for ending in ended] == [True, True]
    assert store.checkpoints._error is None
    assert [store.results(run) for run in "acd"] == [[], [{"run": "c"}], [{"run": "d"}]]
    row = store.get("a")
    assert row is not None
    assert row.status == "running"  # undone: a restart continues it
    store.close()


def test_an_add_in_the_group_is_found_by_its_key_and_committed_before_a_write_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`add_later` (not urgent, the group gathered for an hour): before the commit, its
    idempotency key finds it and `pending` gives its future; `start`, a write of that run
    outside the group, commits the group first, so it finds the run queued; so does
    `get`, a read of it."""
    from converge_dsl.runtime import _checkpoint_sqlite

    monkeypatch.setattr(_checkpoint_sqlite, "GROUP_COMMIT_S", 3600.0)
    store = RunStore(tmp_path)
    try:
        row, added = store.add_later("a", "p", {"inputs": {"x": 1}}, 1.0, ("k", "d"), urgent=False)
        assert (row.status, row.attempts, row.request) == ("queued", 0, {"inputs": {"x": 1}})
        assert store.pending("a") is added
        assert not added.done()
        assert store.checkpoints.query("SELECT id FROM runs") == []  # not committed yet
        assert store.idempotent("k") == ("d", "a")
        started = store.start("a", 2.0)
        assert started is not None
        assert (started.status, started.attempts) == ("running", 1)
        assert added.result(timeout=0) is None
        assert store.pending("a") is None
        assert store.idempotent("k") == ("d", "a")  # from the database now
        _, again = store.add_later("b", "p", {}, 3.0, urgent=False)
        read = store.get("b")
        assert read is not None
        assert read.status == "queued"
        assert again.result(timeout=0) is None
    finally:
        store.close()


def test_an_add_and_its_end_in_the_group_are_one_transaction(tmp_path: Path) -> None:
    """A run added running in the group (a `?wait=true` run) and ended there: the end's
    commit is the add's too, the add told first."""
    store = RunStore(tmp_path)
    commits: list[str] = []
    store._db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    with store._lock:  # one group: the group commit waits for the lock
        _, added = store.add_later("a", "p", {}, 1.0, running=True, urgent=False)
        ending = store.finish_later(
            "a", status="done", stop_reason="converged", body={"n": 1}, events=[], now=2.0
        )
    assert ending.result(timeout=5) is True
    assert added.done()
    assert commits == ["COMMIT"]
    row = store.get("a")
    assert row is not None
    assert (row.status, row.attempts, row.result) == ("done", 1, {"n": 1})
    store.close()


def test_an_add_that_fails_in_the_group_is_a_state_error_and_frees_its_key(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path)
    store._db.execute(
        "CREATE TEMP TRIGGER full BEFORE INSERT ON runs BEGIN "
        "SELECT RAISE(ABORT, 'database or disk is full'); END"
    )
    _, added = store.add_later("a", "p", {}, 1.0, ("k", "d"))
    with pytest.raises(StateError, match=r"cannot write the state: database or disk is full"):
        added.result(timeout=5)
    assert store.pending("a") is None
    assert store.idempotent("k") is None
    assert store.get("a") is None
    store.close()


def test_runs_are_numbered_in_arrival_order_across_restarts_without_an_index_of_it(
    tmp_path: Path,
) -> None:
    """The store numbers the runs it adds after the largest stored (no `runs_seq` index to
    update per run; an older server's is dropped at open): arrival order holds across a
    restart, for runs added at once or in the group commit."""
    store = RunStore(tmp_path)
    store.add("b", "p", {}, 1.0)
    store.add("a", "p", {}, 1.0)
    store.close()
    with sqlite3.connect(tmp_path / STATE_FILE) as db:  # as an older server left it
        db.execute("CREATE INDEX runs_seq ON runs (seq)")
    store = RunStore(tmp_path)
    try:
        _, added = store.add_later("d", "p", {}, 2.0)
        added.result(timeout=5)
        store.add("c", "p", {}, 2.0)
        assert [row.id for row in store.runs()] == ["b", "a", "d", "c"]
        indexes = store._read("SELECT name FROM sqlite_master WHERE type = 'index'")
        assert ("runs_seq",) not in indexes
        assert store._read("SELECT seq FROM runs ORDER BY seq") == [(1,), (2,), (3,), (4,)]
    finally:
        store.close()
