"""`open_wal`: every opener of a new database gets it, in WAL mode; `open_connections`
counts the connections it made that are open."""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from converge_dsl._sqlite import open_connections, open_wal


def _open_together(database: Path, openers: int) -> list[str]:
    barrier, failures = threading.Barrier(openers), []

    def open_at_once() -> None:
        barrier.wait()
        try:
            open_wal(database, busy_timeout=10).close()
        except sqlite3.Error as exc:
            failures.append(str(exc))

    threads = [threading.Thread(target=open_at_once) for _ in range(openers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return failures


def test_openers_of_a_new_database_at_once_all_open_it_in_wal_mode(tmp_path: Path) -> None:
    # Setting WAL mode at once on a new file answered some openers "database is
    # locked" without waiting (a worker of the service failed to start).
    for attempt in range(20):
        database = tmp_path / f"db{attempt}.sqlite3"
        assert _open_together(database, 8) == []
        with contextlib.closing(sqlite3.connect(database)) as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_connection_is_autocommit_and_shared_across_threads(tmp_path: Path) -> None:
    db = open_wal(tmp_path / "db.sqlite3", busy_timeout=1)
    db.execute("CREATE TABLE t (x)")
    thread = threading.Thread(target=lambda: db.execute("INSERT INTO t VALUES (1)"))
    thread.start()
    thread.join()
    assert not db.in_transaction
    with contextlib.closing(sqlite3.connect(tmp_path / "db.sqlite3")) as other:
        assert other.execute("SELECT x FROM t").fetchall() == [(1,)]
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL, not FULL
    db.close()


def test_a_folder_is_not_a_database(tmp_path: Path) -> None:
    with pytest.raises(sqlite3.Error):
        open_wal(tmp_path, busy_timeout=1)


def test_a_database_another_connection_holds_locked_is_refused_after_the_busy_timeout(
    tmp_path: Path,
) -> None:
    database = tmp_path / "db.sqlite3"
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")  # a database in rollback mode, as one not yet opened here
    holder.execute("BEGIN EXCLUSIVE")
    started = time.monotonic()
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            open_wal(database, busy_timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # The retries of a lost race are bounded by the one busy timeout (before, each retry
    # waited it again: 200 of them).
    assert time.monotonic() - started < 10


def test_open_connections_counts_those_open_not_those_closed_or_gone(tmp_path: Path) -> None:
    before = open_connections()
    first, second = (open_wal(tmp_path / f"{n}.sqlite3", busy_timeout=1) for n in "ab")
    third = open_wal(tmp_path / "c.sqlite3", busy_timeout=1)
    assert open_connections() == before + 3
    first.close()
    assert open_connections() == before + 2
    del second  # garbage (once collected): SQLite closed it
    gc.collect()
    assert open_connections() == before + 1
    third.close()
    assert open_connections() == before
