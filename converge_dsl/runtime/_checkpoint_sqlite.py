"""Checkpoint journals kept in a SQLite database: the second adapter of `JournalMedium`.

`SqliteJournals(connection, lock, where)` keeps the journal of each run id in
the tables `checkpoint_records` (one row per record: the same sealed line as
`checkpoint.jsonl` holds, so reading verifies it with the same code) and
`checkpoint_decisions`. `journal(run, alongside=...)` is that run's
`JournalMedium` (see `_journal_media` for the contract):

- each record is written by one transaction, with the statements `alongside`
  gives at that moment (a service stores the run's new events with it: one
  commit for both), so a record is kept across a killed process as soon as
  `append` returns. In WAL mode with `synchronous=NORMAL` (what the owner of
  the connection sets) a commit does not wait for the disk: a power loss may
  lose the last commits, and a resume then starts from the record before them,
  as after a kill mid-cycle; `flush` therefore has nothing to wait for.
- `replace` deletes the run's records and inserts the snapshot in one
  transaction; SQLite never leaves a torn record, so `reopen` only checks.
- `hold` admits one run per id in this process (the database has one owner).

`removal(run)` gives the statements that delete a run's journal, for the
owner to run in the transaction that stores the run's result, so a run that
ended never leaves its journal behind. The connection is shared with its
owner: every use holds `lock`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from converge_dsl.errors import RunError, UsageError

# One SQL statement and its arguments.
Statement = tuple[str, Sequence[Any]]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoint_records (
    run TEXT NOT NULL,
    seq INTEGER NOT NULL,
    line BLOB NOT NULL,
    PRIMARY KEY (run, seq)
);
CREATE TABLE IF NOT EXISTS checkpoint_decisions (
    run TEXT PRIMARY KEY,
    line BLOB NOT NULL
);
"""


class SqliteJournals:
    """The checkpoint journals of one database, by run id (see the module docstring)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock, where: str) -> None:
        self._db = db
        self._lock = lock
        self.where = where
        self._held: set[str] = set()
        self._held_lock = threading.Lock()
        with lock:
            db.executescript(_SCHEMA)

    def journal(
        self, run: str, *, alongside: Callable[[], Sequence[Statement]] | None = None
    ) -> SqliteJournal:
        """The journal of `run`; `alongside` gives statements committed with each record."""
        return SqliteJournal(self, run, alongside or (lambda: ()))

    def exists(self, run: str) -> bool:
        """Whether `run` has a journal (a snapshot was written)."""
        rows = self.query("SELECT 1 FROM checkpoint_records WHERE run = ? LIMIT 1", (run,))
        return bool(rows)

    def runs(self) -> set[str]:
        """The ids that have a journal."""
        return {str(r[0]) for r in self.query("SELECT DISTINCT run FROM checkpoint_records")}

    @staticmethod
    def removal(run: str) -> list[Statement]:
        """The statements deleting the journal and decisions of `run`."""
        return [
            ("DELETE FROM checkpoint_records WHERE run = ?", (run,)),
            ("DELETE FROM checkpoint_decisions WHERE run = ?", (run,)),
        ]

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def commit(self, statements: Sequence[Statement]) -> None:
        """Run `statements` in one transaction (all or none)."""
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for sql, args in statements:
                    self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except sqlite3.Error:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def hold(self, run: str, option: str) -> Iterator[None]:
        with self._held_lock:
            if run in self._held:
                raise UsageError(
                    f"{option} journal of run {run!r} in {self.where!r} is in use by another run",
                    hint="wait for that run to finish, then try again",
                )
            self._held.add(run)
        try:
            yield
        finally:
            with self._held_lock:
                self._held.discard(run)


class SqliteJournal:
    """The journal of one run in a `SqliteJournals` database (a `JournalMedium`)."""

    def __init__(
        self, journals: SqliteJournals, run: str, alongside: Callable[[], Sequence[Statement]]
    ) -> None:
        self._journals = journals
        self._run = run
        self._alongside = alongside
        self._next = 0

    @property
    def where(self) -> str:
        return f"{self._journals.where}#{self._run}"

    @property
    def decisions_where(self) -> str:
        return f"{self._journals.where}#{self._run}/decisions"

    def read(self) -> bytes:
        try:
            rows = self._journals.query(
                "SELECT line FROM checkpoint_records WHERE run = ? ORDER BY seq", (self._run,)
            )
        except sqlite3.Error as exc:
            raise OSError(str(exc)) from None
        if not rows:
            raise FileNotFoundError(self.where)
        return b"".join(bytes(line) for (line,) in rows)

    def replace(self, line: bytes) -> None:
        self._write(
            [
                ("DELETE FROM checkpoint_records WHERE run = ?", (self._run,)),
                (
                    "INSERT INTO checkpoint_records (run, seq, line) VALUES (?, 0, ?)",
                    (self._run, line),
                ),
            ]
        )
        self._next = 1

    def reopen(self, end: int) -> None:
        try:
            rows = self._journals.query(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(line)), 0) FROM checkpoint_records "
                "WHERE run = ?",
                (self._run,),
            )
        except sqlite3.Error as exc:
            raise self._failed(exc) from None
        count, size = int(rows[0][0]), int(rows[0][1])
        if size != end:  # never torn: a record is a row, written whole or not at all
            raise RunError(f"the checkpoint journal {self.where!r} changed while it was read")
        self._next = count

    def append(self, line: bytes) -> None:
        self._write(
            [
                (
                    "INSERT INTO checkpoint_records (run, seq, line) VALUES (?, ?, ?)",
                    (self._run, self._next, line),
                )
            ]
        )
        self._next += 1

    def flush(self) -> None:
        """Nothing to wait for: each record was committed by `append` (see the module)."""

    def close(self) -> None:
        """Nothing to release: the connection is the owner's."""

    def read_decisions(self) -> bytes | None:
        try:
            rows = self._journals.query(
                "SELECT line FROM checkpoint_decisions WHERE run = ?", (self._run,)
            )
        except sqlite3.Error as exc:
            raise OSError(str(exc)) from None
        return bytes(rows[0][0]) if rows else None

    def write_decisions(self, line: bytes) -> None:
        self._write(
            [
                (
                    "INSERT OR REPLACE INTO checkpoint_decisions (run, line) VALUES (?, ?)",
                    (self._run, line),
                )
            ],
            alongside=False,
        )

    def clear_decisions(self) -> None:
        self._write(
            [("DELETE FROM checkpoint_decisions WHERE run = ?", (self._run,))], alongside=False
        )

    def hold(self, option: str) -> contextlib.AbstractContextManager[None]:
        return self._journals.hold(self._run, option)

    def _write(self, statements: list[Statement], *, alongside: bool = True) -> None:
        if alongside:
            statements = [*statements, *self._alongside()]
        try:
            self._journals.commit(statements)
        except sqlite3.Error as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: sqlite3.Error) -> RunError:
        return RunError(
            f"cannot write the checkpoint journal {self.where!r}: {exc}; the run stopped",
            hint="free space or fix the state folder; the checkpoint of the last completed "
            "cycle is kept",
        )
