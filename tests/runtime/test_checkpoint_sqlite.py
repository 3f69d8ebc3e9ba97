"""The SQLite journals' group commit and the owner's writes in it: an owner's write is
committed without waiting for the journals' records to gather; a write that fails is undone
alone and told to its own `done`; the rest of its group commits and the journals go on."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.runtime import SqliteJournals, _checkpoint_sqlite

# Longer than any test may take: a group gathered for the whole window is never committed
# during a test, so whatever is committed was committed without waiting for it.
NEVER_S = 1e6


@pytest.fixture
def journals(tmp_path: Path) -> Iterator[tuple[SqliteJournals, sqlite3.Connection, threading.Lock]]:
    db = sqlite3.connect(tmp_path / "state.db", check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE ends (run TEXT PRIMARY KEY)")
    lock = threading.Lock()
    made = SqliteJournals(db, lock, "state.db")
    yield made, db, lock
    made.close()
    db.close()


def _told() -> tuple[Future[Any], Callable[[Any, BaseException | None], None]]:
    """A future, and the `done` that sets it."""
    future: Future[Any] = Future()

    def done(result: Any, error: BaseException | None) -> None:
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    return future, done


def _end(run: str, fail: BaseException | None = None) -> Callable[[sqlite3.Connection], str]:
    """An owner's write: a row of `ends`, then `fail` raised if given."""

    def write(db: sqlite3.Connection) -> str:
        db.execute("INSERT INTO ends VALUES (?)", (run,))
        if fail is not None:
            raise fail
        return run

    return write


def _rows(db: sqlite3.Connection, lock: threading.Lock, sql: str) -> list[Any]:
    with lock:
        return [row[0] for row in db.execute(sql)]


@pytest.mark.parametrize(
    "fail", [sqlite3.IntegrityError("refused"), RuntimeError("a fault of the owner")]
)
def test_an_owner_write_that_fails_is_undone_alone_and_the_journals_go_on(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock], fail: BaseException
) -> None:
    made, db, lock = journals
    with lock:  # the three are one group: the committer waits for the lock
        made.journal("r").replace(b"record\n")
        first, told_first = _told()
        made.queue_write(_end("a"), told_first)
        failed, told_failed = _told()
        made.queue_write(_end("b", fail), told_failed)
        last, told_last = _told()
        made.queue_write(_end("c"), told_last)
    assert (first.result(timeout=5), last.result(timeout=5)) == ("a", "c")
    with pytest.raises(type(fail)):
        failed.result(timeout=5)
    assert _rows(db, lock, "SELECT run FROM ends ORDER BY run") == ["a", "c"]
    assert _rows(db, lock, "SELECT line FROM checkpoint_records") == [b"record\n"]
    later, told_later = _told()
    made.queue_write(_end("d"), told_later)  # accepted and committed: the journals go on
    made.journal("s").replace(b"next\n")
    assert later.result(timeout=5) == "d"
    assert made.journal("s").read() == b"next\n"


def test_a_done_that_raises_leaves_the_others_told(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock],
) -> None:
    made, db, lock = journals

    def raising(result: Any, error: BaseException | None) -> None:
        raise RuntimeError("a fault of the owner's callback")

    with lock:
        made.queue_write(_end("a"), raising)
        told, done = _told()
        made.queue_write(_end("b"), done)
    assert told.result(timeout=5) == "b"
    later, told_later = _told()
    made.queue_write(_end("c"), told_later)
    assert later.result(timeout=5) == "c"
    assert _rows(db, lock, "SELECT run FROM ends ORDER BY run") == ["a", "b", "c"]


def test_a_group_the_owner_broke_refuses_later_writes_instead_of_dropping_them(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock],
) -> None:
    """An owner's write that ends the group's transaction itself, then raises something
    other than a SQLite error: the group fails, told to its writes, and a later write is
    refused with it instead of being accepted and never committed."""
    made, _, _ = journals

    def breaking(db: sqlite3.Connection) -> None:
        db.execute("ROLLBACK")
        raise RuntimeError("a fault of the owner")

    failed, told = _told()
    made.queue_write(breaking, told)
    with pytest.raises(RuntimeError, match="a fault of the owner"):
        failed.result(timeout=5)
    for _ in range(500):  # the committer keeps the error once it has told the group
        if made._error is not None:
            break
        time.sleep(0.01)
    with pytest.raises(sqlite3.Error, match="a fault of the owner"):
        made.queue_write(_end("z"), _told()[1])


def _commits(db: sqlite3.Connection) -> list[str]:
    """The COMMITs `db` runs from now on, as they run."""
    seen: list[str] = []
    db.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


def test_an_owner_write_is_committed_at_once_with_the_records_gathered_before_it(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The records alone wait for the group; an owner's write, which someone waits on, cuts
    the gathering short, and the records queued before it go first in its transaction."""
    monkeypatch.setattr(_checkpoint_sqlite, "GROUP_COMMIT_S", NEVER_S)
    made, db, lock = journals
    commits = _commits(db)
    journal = made.journal("r")
    journal.replace(b"snapshot\n")
    journal.append(b"record\n")
    assert _rows(db, lock, "SELECT line FROM checkpoint_records") == []  # gathered
    told, done = _told()
    made.queue_write(_end("a"), done)
    assert told.result(timeout=30) == "a"
    assert commits == ["COMMIT"]  # one transaction: the records, then the write
    assert _rows(db, lock, "SELECT line FROM checkpoint_records ORDER BY seq") == [
        b"snapshot\n",
        b"record\n",
    ]


def test_an_owner_write_queued_during_a_commit_goes_with_the_next_turn(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_checkpoint_sqlite, "GROUP_COMMIT_S", NEVER_S)
    made, db, lock = journals
    commits = _commits(db)
    committing, release = threading.Event(), threading.Event()

    def slow(db: sqlite3.Connection) -> str:  # holds its group's commit until released
        committing.set()
        assert release.wait(timeout=30)
        return _end("a")(db)

    first, told_first = _told()
    made.queue_write(slow, told_first)
    assert committing.wait(timeout=30)
    made.journal("r").replace(b"record\n")
    second, told_second = _told()
    made.queue_write(_end("b"), told_second)
    release.set()
    assert (first.result(timeout=30), second.result(timeout=30)) == ("a", "b")
    assert commits == ["COMMIT", "COMMIT"]  # the second turn did not wait for a group
    assert _rows(db, lock, "SELECT line FROM checkpoint_records") == [b"record\n"]
    assert _rows(db, lock, "SELECT run FROM ends ORDER BY run") == ["a", "b"]


def test_a_write_queued_after_close_is_refused_not_left_unanswered(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock],
) -> None:
    made, db, lock = journals
    made.close()
    told = _told()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        made.queue_write(_end("late"), told[1])
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        made.queue("late", [("INSERT INTO ends VALUES (?)", ("late record",))])
    assert not told[0].done()
    assert _rows(db, lock, "SELECT run FROM ends") == []


def test_a_write_that_is_not_urgent_waits_for_the_group_and_goes_first_in_it(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`urgent=False` (a run's add whose caller waits for its end): the write is gathered
    as records are, and an urgent write queued after it commits both, in the order
    queued, in one transaction."""
    monkeypatch.setattr(_checkpoint_sqlite, "GROUP_COMMIT_S", NEVER_S)
    made, db, lock = journals
    commits = _commits(db)
    added, done_added = _told()
    made.queue_write(_end("added"), done_added, urgent=False)
    time.sleep(0.2)  # the committer had the time to commit it, were it urgent
    assert not added.done()
    assert commits == []
    ended, done_ended = _told()
    made.queue_write(_end("ended"), done_ended)
    assert ended.result(timeout=30) == "ended"
    assert added.result(timeout=0) == "added"
    assert commits == ["COMMIT"]
    assert _rows(db, lock, "SELECT run FROM ends ORDER BY rowid") == ["added", "ended"]


def test_a_write_that_is_not_urgent_alone_is_committed_once_the_group_gathered(
    journals: tuple[SqliteJournals, sqlite3.Connection, threading.Lock],
) -> None:
    """Queued to an idle committer, a write that is not urgent wakes it: it is committed
    once the group's window has passed, with nothing else queued."""
    made, db, lock = journals
    told, done = _told()
    made.queue_write(_end("alone"), done, urgent=False)
    assert told.result(timeout=30) == "alone"
    assert _rows(db, lock, "SELECT run FROM ends") == ["alone"]
