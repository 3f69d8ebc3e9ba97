"""Checkpoint journals kept in a SQLite database: the second adapter of `JournalMedium`.

`SqliteJournals(connection, lock, where)` keeps the journal of each run id in
the tables `checkpoint_records` (one row per record: the same sealed line as
`checkpoint.jsonl` holds, so reading verifies it with the same code) and
`checkpoint_decisions`. `journal(run, alongside=...)` is that run's
`JournalMedium` (see `_journal_media` for the contract). It differs from the
folder's in when a record becomes durable:

- Writes are queued in order, per run, and committed in groups: a thread
  commits every write queued by every run in one transaction at most
  `GROUP_COMMIT_S` after the first of them, with the statements `alongside`
  gave when each record was queued (a service's new events: one commit for
  both). The journals' own writes go first, in order; then those given
  `alongside`, by statement (every run's events: one `executemany`), so their
  order is kept only among the same statement. Records, which no one waits
  on, are gathered for the whole `GROUP_COMMIT_S` (one transaction for many);
  an owner's write (`queue_write`, below), which someone waits on, cuts the
  gathering short: the thread commits it, with whatever is queued by then, at
  once when idle or gathering, else in the turn right after the commit in
  progress. So a record survives a killed process once its group is
  committed (`flush` waits for that), not when `append` returns: a kill loses
  at most the records of the last `GROUP_COMMIT_S`, and a resume starts from
  the record before them, as after a kill mid-cycle. `close` does not wait:
  the group commit, or the owner's transaction (`take`), writes the rest.
- The owner ends a run in one transaction of its own: `take(run)` gives the
  run's queued writes (to keep a pause's last records with its status) and
  `removal(run)` the statements deleting its journal (a run that ended); the
  writes of a short run that ended are then never written at all. The owner
  calls them once the run writes nothing more: holding `lock` for a
  transaction of its own, or before it queues the end as a write of the next
  group (`queue_write`), so no write of a run lands after its removal.
- The owner may also queue a write of its own with the group
  (`queue_write(write, done)`): `write(db)` runs in the group's transaction
  after the journals' writes and those given `alongside`, each in the order
  queued, and `done(result, error)` is called once the group committed (the
  error, and no result, when it failed). A write that raises is undone alone
  (a savepoint) and its error told to its `done` only: the rest of the group
  commits, and the journals go on. A `done` that raises does not keep the
  others from being told. A service's run ends that way: its conditional
  UPDATE shares the group's commit instead of paying one of its own, and the
  run is answered once that commit is made (not held for the group to gather).
  A write queued with `urgent=False` does not cut the gathering short: it
  waits for the group, as records do (a run's add whose caller waits for the
  run's end, which is queued after it and commits it at the latest).
- `replace` deletes the run's records and inserts the snapshot in one
  transaction; SQLite never leaves a torn record, so `reopen` only checks.
  Reading a journal first commits what it has queued.
- `hold` admits one run per id in this process (the database has one owner).

In WAL mode with `synchronous=NORMAL` (what the owner of the connection sets)
a commit does not wait for the disk: a power loss may lose the last commits.
The connection is shared with its owner: every use holds `lock`. `close()`
commits what is queued and stops the thread.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from converge_dsl import codes
from converge_dsl.errors import RunError, UsageError

# One SQL statement and its arguments.
Statement = tuple[str, Sequence[Any]]
# How long the group commit gathers writes into one transaction (seconds).
GROUP_COMMIT_S = 0.05
# A write of the owner's in a group (`queue_write`): what to run, and whom to tell.
GroupWrite = tuple[Callable[[sqlite3.Connection], Any], Callable[[Any, BaseException | None], None]]

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


def execute_all(db: sqlite3.Connection, statements: Iterable[Statement]) -> None:
    """Run `statements` in order, a run of consecutive ones with the same SQL (a run's
    events, say) as one `executemany`."""
    for sql, group in itertools.groupby(statements, key=lambda statement: statement[0]):
        rows = [args for _, args in group]
        if len(rows) == 1:
            db.execute(sql, rows[0])
        else:
            db.executemany(sql, rows)


class SqliteJournals:
    """The checkpoint journals of one database, by run id (see the module docstring)."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock, where: str) -> None:
        self._db = db
        self._lock = lock
        self.where = where
        self._held: set[str] = set()
        self._held_lock = threading.Lock()
        # Queued writes by run, in order, each marked whether it is the journal's own (or
        # given `alongside`); `_cond` guards them and wakes the committer.
        self._queued: dict[str, list[tuple[Statement, bool]]] = {}
        self._writes: list[GroupWrite] = []  # the owner's (`queue_write`), in order
        self._urgent = 0  # how many of `_writes` cut the gathering short
        self._cond = threading.Condition()
        self._closing = False
        self._error: sqlite3.Error | None = None
        with lock:
            db.executescript(_SCHEMA)
        self._thread = threading.Thread(target=self._commit_loop, name="journal-commit")
        self._thread.daemon = True
        self._thread.start()

    def journal(
        self, run: str, *, alongside: Callable[[], Sequence[Statement]] | None = None
    ) -> SqliteJournal:
        """The journal of `run`; `alongside` gives statements committed with each record."""
        return SqliteJournal(self, run, alongside or (lambda: ()))

    def exists(self, run: str) -> bool:
        """Whether `run` has a journal (a snapshot was written or queued)."""
        with self._cond:
            if self._queued.get(run):
                return True
        rows = self.query("SELECT 1 FROM checkpoint_records WHERE run = ? LIMIT 1", (run,))
        return bool(rows)

    def take(self, run: str) -> list[Statement]:
        """The queued writes of `run`, no longer queued: the caller commits them (holding
        `lock`, see the module docstring)."""
        with self._cond:
            return [statement for statement, _ in self._queued.pop(run, [])]

    def removal(self, run: str, *, after: Sequence[Statement] = ()) -> list[Statement]:
        """The statements deleting the journal and decisions of `run`, after the statements
        queued `alongside` its records and then `after` (its own queued writes are
        dropped; call holding `lock`)."""
        with self._cond:
            queued = self._queued.pop(run, [])
        return [
            *(statement for statement, own in queued if not own),
            *after,
            ("DELETE FROM checkpoint_records WHERE run = ?", (run,)),
            ("DELETE FROM checkpoint_decisions WHERE run = ?", (run,)),
        ]

    def removal_unless(self, kept: str) -> list[Statement]:
        """The statements deleting the journal and decisions of every run not among `kept`
        (SQL selecting run ids): what another writer (a worker) committed for a run its
        owner never stored, the owner killed first (call holding `lock`)."""
        return [
            (f"DELETE FROM checkpoint_records WHERE run NOT IN ({kept})", ()),
            (f"DELETE FROM checkpoint_decisions WHERE run NOT IN ({kept})", ()),
        ]

    def query(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def queue(
        self, run: str, statements: Sequence[Statement], alongside: Sequence[Statement] = ()
    ) -> None:
        """Queue the journal's `statements` of `run`, then `alongside`, for the next group
        commit."""
        with self._cond:
            self._check_open()
            was_idle = not self._queued
            queued = self._queued.setdefault(run, [])
            queued.extend((statement, True) for statement in statements)
            queued.extend((statement, False) for statement in alongside)
            if was_idle:
                self._cond.notify_all()

    def queue_write(
        self,
        write: Callable[[sqlite3.Connection], Any],
        done: Callable[[Any, BaseException | None], None],
        *,
        urgent: bool = True,
    ) -> None:
        """Queue the owner's `write` for the next group commit; `done` is told how it went
        (see the module docstring; `urgent=False`: committed with the group, not at
        once). Call `take` or `removal` before, for the writes of a run that `write`
        ends."""
        with self._cond:
            self._check_open()
            # the committer may be idle (wake it) or gathering (an urgent write cuts it short)
            wake = (urgent and not self._urgent) or (not self._writes and not self._queued)
            self._writes.append((write, done))
            self._urgent += urgent
            if wake:
                self._cond.notify_all()

    def commit_now(self, run: str | None = None) -> None:
        """Commit the queued writes of `run` (of every run, and the owner's, when None) at
        once."""
        writes: list[GroupWrite] = []
        with self._lock:
            with self._cond:
                if run is None:
                    groups, self._queued = list(self._queued.values()), {}
                    writes, self._writes, self._urgent = self._writes, [], 0
                else:
                    groups = [self._queued.pop(run, [])]
            statements = [
                *(statement for group in groups for statement, own in group if own),
                *sorted(
                    (statement for group in groups for statement, own in group if not own),
                    key=lambda statement: statement[0],
                ),
            ]
            try:
                outcomes = self._commit(statements, [write for write, _ in writes])
            except BaseException as exc:
                for _, done in writes:
                    _tell(done, None, exc)
                raise
        for (_, done), (result, error) in zip(writes, outcomes, strict=True):
            _tell(done, result, error)

    def _check_open(self) -> None:
        """Raise the group commit's error, or that the journals are closed: nothing queued
        now would be committed (call holding `_cond`)."""
        if self._error is not None:
            raise self._error
        if self._closing:
            raise sqlite3.ProgrammingError("the checkpoint journals are closed")

    def close(self) -> None:
        """Commit what is queued and stop the group commit; a write queued after this
        raises `sqlite3.ProgrammingError`."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout=10)
        self.commit_now()

    def _commit(
        self,
        statements: Sequence[Statement],
        writes: Sequence[Callable[[sqlite3.Connection], Any]] = (),
    ) -> list[tuple[Any, Exception | None]]:
        """Run `statements`, then `writes`, in one transaction, holding `lock`: all or
        none, but for a write that raises, which is undone alone (`_write_apart`); what
        each write returned, or its error."""
        if not statements and not writes:
            return []
        try:
            self._db.execute("BEGIN IMMEDIATE")
            execute_all(self._db, statements)
            outcomes = [self._write_apart(write) for write in writes]
            self._db.execute("COMMIT")
            return outcomes
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def _write_apart(
        self, write: Callable[[sqlite3.Connection], Any]
    ) -> tuple[Any, Exception | None]:
        """Run the owner's `write` in a savepoint of the group's transaction: what it
        returned, or the error it raised once what it wrote is undone. When SQLite rolled
        back the whole transaction on that error (it may, on a full disk), the group
        fails with it."""
        self._db.execute("SAVEPOINT owner_write")
        try:
            result = write(self._db)
        except Exception as exc:
            if not self._db.in_transaction:
                raise
            self._db.execute("ROLLBACK TO owner_write")
            self._db.execute("RELEASE owner_write")
            return None, exc
        self._db.execute("RELEASE owner_write")
        return result, None

    def _commit_loop(self) -> None:
        while True:
            with self._cond:
                while not self._queued and not self._writes and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                # the journals' records are gathered; an owner's urgent write is waited on
                deadline = time.monotonic() + GROUP_COMMIT_S
                while (
                    not self._closing
                    and not self._urgent
                    and (left := deadline - time.monotonic()) > 0
                ):
                    self._cond.wait(left)
            try:
                self.commit_now()
            except Exception as exc:  # the owner's writes were told (`commit_now`)
                error = exc if isinstance(exc, sqlite3.Error) else sqlite3.Error(repr(exc))
                with self._cond:
                    self._error = error
                    # queued since: never committed
                    writes, self._writes, self._urgent = self._writes, [], 0
                    self._cond.notify_all()
                for _, done in writes:
                    _tell(done, None, exc)
                return

    @contextlib.contextmanager
    def hold(self, run: str, option: str) -> Iterator[None]:
        with self._held_lock:
            if run in self._held:
                raise UsageError(
                    f"{option} journal of run {run!r} in {self.where!r} is in use by another run",
                    hint="wait for that run to finish, then try again",
                    code=codes.FOLDER_IN_USE,
                )
            self._held.add(run)
        try:
            yield
        finally:
            with self._held_lock:
                self._held.discard(run)


def _tell(
    done: Callable[[Any, BaseException | None], None], result: Any, error: BaseException | None
) -> None:
    """Call the owner's `done`; what it raises is reported, not raised, so the owner's
    other writes are told too and the group commit goes on."""
    try:
        done(result, error)
    except Exception:
        logging.getLogger(__name__).exception("a group commit's callback failed")


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
    def journals(self) -> SqliteJournals:
        """The database's journals this one is of."""
        return self._journals

    @property
    def where(self) -> str:
        return f"{self._journals.where}#{self._run}"

    @property
    def decisions_where(self) -> str:
        return f"{self._journals.where}#{self._run}/decisions"

    def read(self) -> bytes:
        try:
            self._journals.commit_now(self._run)
            rows = self._journals.query(
                "SELECT line FROM checkpoint_records WHERE run = ? ORDER BY seq", (self._run,)
            )
        except sqlite3.Error as exc:
            raise OSError(str(exc)) from None
        if not rows:
            raise FileNotFoundError(self.where)
        return b"".join(bytes(line) for (line,) in rows)

    def replace(self, line: bytes) -> None:
        self._queue(
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
            self._journals.commit_now(self._run)
            rows = self._journals.query(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(line)), 0) FROM checkpoint_records "
                "WHERE run = ?",
                (self._run,),
            )
        except sqlite3.Error as exc:
            raise self._failed(exc) from None
        count, size = int(rows[0][0]), int(rows[0][1])
        if size != end:  # never torn: a record is a row, written whole or not at all
            raise RunError(
                f"the checkpoint journal {self.where!r} changed while it was read",
                code=codes.CHECKPOINT_CORRUPT,
            )
        self._next = count

    def append(self, line: bytes) -> None:
        self._queue(
            [
                (
                    "INSERT INTO checkpoint_records (run, seq, line) VALUES (?, ?, ?)",
                    (self._run, self._next, line),
                )
            ]
        )
        self._next += 1

    def flush(self) -> None:
        """Commit every write queued so far (at once, not waiting for the group)."""
        try:
            self._journals.commit_now(self._run)
        except sqlite3.Error as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        """Nothing to wait for: the group commit or the owner writes the rest (see the
        module docstring)."""

    def read_decisions(self) -> bytes | None:
        try:
            self._journals.commit_now(self._run)
            rows = self._journals.query(
                "SELECT line FROM checkpoint_decisions WHERE run = ?", (self._run,)
            )
        except sqlite3.Error as exc:
            raise OSError(str(exc)) from None
        return bytes(rows[0][0]) if rows else None

    def write_decisions(self, line: bytes) -> None:
        self._queue(
            [
                (
                    "INSERT OR REPLACE INTO checkpoint_decisions (run, line) VALUES (?, ?)",
                    (self._run, line),
                )
            ],
            alongside=False,
        )

    def clear_decisions(self) -> None:
        self._queue(
            [("DELETE FROM checkpoint_decisions WHERE run = ?", (self._run,))], alongside=False
        )

    def hold(self, option: str) -> contextlib.AbstractContextManager[None]:
        return self._journals.hold(self._run, option)

    def _queue(self, statements: list[Statement], *, alongside: bool = True) -> None:
        try:
            self._journals.queue(self._run, statements, self._alongside() if alongside else ())
        except sqlite3.Error as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: sqlite3.Error) -> RunError:
        return RunError(
            f"cannot write the checkpoint journal {self.where!r}: {exc}; the run stopped",
            hint="free space or fix the state folder; the checkpoint of the last completed "
            "cycle is kept",
        )
