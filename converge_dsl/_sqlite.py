"""`open_wal(path, busy_timeout)`: a connection to the SQLite database at `path`, in
WAL mode, that several threads and processes may share.

The one way the project opens its databases (the answer cache, a service's state,
a worker's checkpoint journals): autocommit (callers say `BEGIN` themselves), any
thread, `synchronous=NORMAL`, and a wait of `busy_timeout` seconds for another
writer. Raises `sqlite3.Error` for the caller to word.

`open_connections()` counts the connections it opened that are still open: a
process forked while one is open would inherit SQLite's record of the locks this
process holds on that file, so a connection the child opens to it would take no
lock of its own (SQLite's documented way to corrupt a database). A process
forks its workers only when the count is 0 (`batch._process`).
"""

from __future__ import annotations

import sqlite3
import time
import weakref
from pathlib import Path


class _Connection(sqlite3.Connection):
    """A connection `open_connections` can count: weakly referenced, marked when closed."""

    closed = False

    def close(self) -> None:
        self.closed = True
        super().close()


_OPENED: weakref.WeakSet[_Connection] = weakref.WeakSet()


def open_connections() -> int:
    """How many connections `open_wal` made in this process are open now."""
    return sum(not db.closed for db in list(_OPENED))


def open_wal(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """A connection to `path` (created if missing) in WAL mode."""
    db = sqlite3.connect(
        path,
        timeout=busy_timeout,
        isolation_level=None,
        check_same_thread=False,
        factory=_Connection,
    )
    _OPENED.add(db)
    try:
        _use_wal(db, busy_timeout)
        db.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        db.close()
        raise
    return db


def _use_wal(db: sqlite3.Connection, busy_timeout: float) -> None:
    """Put `db` in WAL mode unless it is already (the mode stays in the file).

    Processes opening a new database together all change its mode at once; SQLite
    answers the losers "database is locked" at once, without the busy timeout (a
    lock upgrade it cannot wait for), so a loser reads the mode again, for at most
    `busy_timeout` seconds in all (a database another connection really holds
    locked answers after that wait, as any statement would)."""
    deadline = time.monotonic() + busy_timeout
    attempt = 0
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        attempt += 1
        time.sleep(min(0.01 * (1 + attempt % 5), max(0.0, deadline - time.monotonic())))
