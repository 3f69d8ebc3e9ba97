"""The service's durable state: runs, their events and results in one SQLite file (WAL).

`RunStore(path)` opens (or creates) `STATE/runs.sqlite3` in WAL mode. A run is
one row of `runs` with its status: `queued` -> `running` -> `done`, or `paused`
(waiting for a human; `decide` queues it again with the decisions), or
`cancelled`; a run a worker takes at once is added `running` (`add`). A run's
events are numbered from 0, each the compact record the run's `EventSink` made
(`_events`), rendered as its trace line when read (`events`). They are stored
as they are handed over, several consecutive records to a row of `events`:
`seq` is the number of the first, `line` the records joined by newlines
(neither a record nor a line an older server stored whole holds a raw newline;
an older server's rows hold one each). One row per write, not per record, keeps
the index and the statements a run costs small. The result of a run that ended
is a row of `results` (the run's row keeps only a pause's, which is no end; an
older server's rows keep both), written in the same transaction that marks the
run `done`, so a run ends exactly once: `finish` refuses a run that is not
`running` (a second worker, or a run recovered after a crash that had already
ended). The runs' checkpoint journals live in the same file (`checkpoints`,
`converge_dsl.runtime.SqliteJournals`): each record is committed with the run's
events written since the last one, and a run's journal is deleted in the
transaction that stores its result (or cancels it). `recover()` at start moves
every `running` run back to `queued` (the server died under it: it continues
from its checkpoint), deletes the events and journals of runs never stored,
and returns the queued ones in arrival order. A state an older server made is
taken over when opened (`_store_sql.MIGRATION`).

Every call is synchronous and short (one transaction, under the store's lock:
atomic within the process, which is the only writer of `runs`); the service
calls it from its event loop. `finish_later` is `finish` as a write of the
checkpoint journals' next group commit, its answer a future set once that group
is committed; `add_later` is `add` so (its future set once the run is
committed). Until then `idempotent` finds its key and `pending` its future, and
a write of that run (`start`, `finish`, `cancel`, `decide`, `requeue`) first
commits the group: a write queued after the add (its end) commits with it or
after it, never before. A database that fails is `StateError` (CD993)
from any call, its transaction rolled back. Only SQL that SQLite 3.31 knows is
used (no `RETURNING`). A process killed mid-transaction loses that transaction
only (WAL); `synchronous=NORMAL` keeps every committed one across a kill.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl._sqlite import open_wal
from converge_dsl.runtime import execute_all

from ._errors import ServeFailed
from ._store_events import StoredEvents
from ._store_sql import (
    MIGRATION,
    SCHEMA,
    SELECT,
    SETTLED_SENT,
    Statement,
    add_statements,
)

STATE_FILE = "runs.sqlite3"
# The most runs one retention transaction deletes (SQLite's limit of bound values is
# 32766; a batch also bounds how long the database is held).
PRUNE_BATCH = 500
# The tables holding a run's rows, and the column naming the run.
_RUN_TABLES = ("runs.id", "events.run", "results.run", "idempotency.run", "sent.run")
_TABLES = "SELECT name FROM sqlite_master WHERE type = 'table'"
STATUSES = ("queued", "running", "paused", "done", "cancelled")
FINISHED = frozenset({"done", "cancelled"})
# A run that neither runs nor waits to: finished, or paused for a decision.
SETTLED = FINISHED | {"paused"}


class StateError(ServeFailed):
    """The state folder or its database cannot be used (CD993)."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(codes.SERVE_STATE_UNUSABLE, message, hint=hint)


@dataclass(frozen=True)
class RunRow:
    """One run as stored: its request (inputs, budget), status and result when ended."""

    id: str
    pipeline: str
    request: JsonObject
    status: str
    stop_reason: str | None
    decisions: Mapping[str, bool]
    attempts: int
    result: JsonObject | None
    created: float
    updated: float
    # `result` as the JSON text the store wrote, when this process wrote it with
    # `result_json` (an answer sends it as it is instead of encoding it again).
    result_json: str | None = field(default=None, compare=False, repr=False)


class RunStore(StoredEvents):
    """The SQLite state of one service (see the module docstring; its events:
    `StoredEvents`); thread-safe."""

    def __init__(self, folder: Path) -> None:
        self.database = folder / STATE_FILE
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = open_wal(self.database, busy_timeout=5)
            tables = {name for (name,) in self._db.execute(_TABLES)}
            older = "runs" in tables and "sent" not in tables  # an older server's state
            self._db.executescript(f"BEGIN IMMEDIATE;{SCHEMA}{MIGRATION if older else ''}COMMIT;")
            # arrival order: the one writer numbers its runs after the largest stored
            (last,) = self._db.execute("SELECT COALESCE(MAX(seq), 0) FROM runs").fetchone()
            self._seq = itertools.count(int(last) + 1)
        except (OSError, sqlite3.Error) as exc:
            raise StateError(
                f"cannot open the state in {str(folder)!r}: {exc}",
                hint="give --state a folder you can write to, used by one server at a time",
            ) from None
        self._lock = threading.Lock()
        # Runs added with `add_later`, not yet committed: their futures, and their keys.
        self._pending: dict[str, Future[None]] = {}
        self._pending_keys: dict[str, tuple[str, str]] = {}
        from converge_dsl.runtime import SqliteJournals

        try:
            self.checkpoints = SqliteJournals(self._db, self._lock, str(folder / STATE_FILE))
        except sqlite3.Error as exc:
            raise StateError(f"cannot open the state in {str(folder)!r}: {exc}") from None

    def close(self) -> None:
        self.checkpoints.close()  # commits the journals' queued records
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def _transaction(self, *, autocommit: bool = False) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, in one write transaction: BEGIN IMMEDIATE
        before the block, COMMIT after it, ROLLBACK when it raises. With `autocommit`
        there is no BEGIN: each statement of the block is a transaction of its own (one
        write, or a write and reads of what it wrote; the lock keeps them together in
        this process). A `sqlite3.Error` becomes `StateError`."""
        with self._lock:
            try:
                if not autocommit:
                    self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    self._rollback()
                    raise
                if not autocommit:
                    self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StateError(f"cannot write the state: {exc}") from None

    def _rollback(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # the error that led here is reported
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        # one statement: a transaction of its own (autocommit)
        with self._transaction(autocommit=len(statements) == 1) as db:
            execute_all(db, statements)

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StateError(f"cannot read the state: {exc}") from None

    # --- runs -----------------------------------------------------------------

    def add(
        self,
        run: str,
        pipeline: str,
        request: JsonObject,
        now: float,
        idempotency: tuple[str, str] | None = None,
        *,
        running: bool = False,
    ) -> RunRow:
        """A new queued run; `idempotency` (key, digest of the request) is kept with it. The
        run as stored (its request read back from the text written, as `get` reads it).
        `running`: added already started (its first attempt), in the same write, for a
        worker that takes it at once (what `start` would write next)."""
        statements, row = _adding(
            run, pipeline, request, now, idempotency, seq=next(self._seq), running=running
        )
        self._write(statements)
        return row

    def add_later(
        self,
        run: str,
        pipeline: str,
        request: JsonObject,
        now: float,
        idempotency: tuple[str, str] | None = None,
        *,
        running: bool = False,
        urgent: bool = True,
    ) -> tuple[RunRow, Future[None]]:
        """`add` as a write of the checkpoint journals' next group commit: the run as
        stored, and a future set once it is committed (`StateError` when that failed).
        `urgent=False`: committed with the group, not at once (the caller waits for a
        write queued after this one, the run's end, which commits it at the latest)."""
        statements, row = _adding(
            run, pipeline, request, now, idempotency, seq=next(self._seq), running=running
        )
        future: Future[None] = Future()
        self._pending[run] = future
        if idempotency is not None:
            self._pending_keys[idempotency[0]] = (idempotency[1], run)

        def done(_: object, error: BaseException | None) -> None:
            # committed (or failed): the database answers for it from now on
            self._pending.pop(run, None)
            if idempotency is not None:
                self._pending_keys.pop(idempotency[0], None)
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(StateError(f"cannot write the state: {error}"))

        try:
            self.checkpoints.queue_write(
                lambda db: execute_all(db, statements), done, urgent=urgent
            )
        except sqlite3.Error as exc:
            done(None, exc)
        return row, future

    def pending(self, run: str) -> Future[None] | None:
        """The future of `run`'s add while it is queued (`add_later`), else None."""
        return self._pending.get(run)

    def _committed(self, run: str) -> None:
        """Commit the journals' group now when `run`'s add is still queued in it, so that a
        write of `run` made outside the group finds it (see the module docstring)."""
        if run in self._pending:
            try:
                self.checkpoints.commit_now()
            except sqlite3.Error as exc:
                raise StateError(f"cannot write the state: {exc}") from None

    def idempotent(self, key: str) -> tuple[str, str] | None:
        """The digest and run id an idempotency key was first given with, if any (a run
        whose add is queued too)."""
        queued = self._pending_keys.get(key)
        if queued is not None:
            return queued
        rows = self._read("SELECT digest, run FROM idempotency WHERE key = ?", (key,))
        return (str(rows[0][0]), str(rows[0][1])) if rows else None

    def prune(
        self, *, keep: int | None, before: float | None, batch: int = PRUNE_BATCH
    ) -> list[str]:
        """Delete the finished runs (done, cancelled) past the newest `keep` finished ones
        or last changed before `before` (seconds since the epoch), with their events,
        results, checkpoint journals and idempotency keys; the ids deleted. A paused,
        queued or running run is never deleted. Runs go `batch` at a time, each batch one
        transaction: a first pass over a large backlog neither holds the database for
        long nor writes one transaction per run."""
        chosen: set[str] = set()
        finished = "status IN ('done', 'cancelled')"
        if keep is not None:
            rows = self._read(
                f"SELECT id FROM runs WHERE {finished} ORDER BY updated DESC, seq DESC "
                "LIMIT -1 OFFSET ?",
                (keep,),
            )
            chosen.update(str(r[0]) for r in rows)
        if before is not None:
            rows = self._read(f"SELECT id FROM runs WHERE {finished} AND updated < ?", (before,))
            chosen.update(str(r[0]) for r in rows)
        ordered = sorted(chosen)
        gone: list[str] = []
        for start in range(0, len(ordered), max(1, batch)):
            gone += self._prune_batch(ordered[start : start + max(1, batch)])
        return gone

    def _prune_batch(self, runs: Sequence[str]) -> list[str]:
        """Delete `runs` that are still finished, in one transaction; those deleted."""
        marks = ", ".join("?" * len(runs))
        with self._transaction() as db:
            # still finished: nothing else runs them (a decision may have queued none,
            # but a run is never taken back from `done`)
            gone = [
                str(r[0])
                for r in db.execute(
                    f"SELECT id FROM runs WHERE id IN ({marks}) AND "
                    "status IN ('done', 'cancelled') ORDER BY id",
                    tuple(runs),
                ).fetchall()
            ]
            if gone:
                kept = ", ".join("?" * len(gone))
                for table, column in (name.split(".") for name in _RUN_TABLES):
                    db.execute(f"DELETE FROM {table} WHERE {column} IN ({kept})", tuple(gone))
                # a finished run has nothing queued: only its journal's deletions,
                # grouped by statement so each is one executemany
                removals = [s for run in gone for s in self.checkpoints.removal(run)]
                execute_all(db, sorted(removals, key=lambda s: s[0]))
        return gone

    def get(self, run: str) -> RunRow | None:
        self._committed(run)  # an add still queued is read as stored
        rows = self._read(SELECT + " WHERE id = ?", (run,))
        return _row(rows[0]) if rows else None

    def runs(self, status: str | None = None) -> list[RunRow]:
        """Every run (of `status`), in arrival order."""
        if status is None:
            return [_row(r) for r in self._read(SELECT + " ORDER BY seq")]
        return [_row(r) for r in self._read(SELECT + " WHERE status = ? ORDER BY seq", (status,))]

    def counts(self) -> dict[tuple[str, str, str], int]:
        """(pipeline, status, stop reason or "") -> how many runs."""
        rows = self._read(
            "SELECT pipeline, status, COALESCE(stop_reason, ''), COUNT(*) FROM runs "
            "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        )
        return {(name, status, reason): count for name, status, reason, count in rows}

    def start(self, run: str, now: float, *, queued: RunRow | None = None) -> RunRow | None:
        """Mark a queued run running (one more attempt): the run as it now stands, read
        under the same lock (no `RETURNING`, which SQLite before 3.35 lacks); None if it is
        no longer queued. `queued`: the run as the caller added it (`add`), still queued
        if anything: the update starts from it instead of reading the run back."""
        self._committed(run)
        with self._transaction(autocommit=True) as db:
            cursor = db.execute(
                "UPDATE runs SET status = 'running', attempts = attempts + 1, updated = ? "
                "WHERE id = ? AND status = 'queued'",
                (now, run),
            )
            if cursor.rowcount != 1:
                return None
            if queued is not None:
                return replace(queued, status="running", attempts=queued.attempts + 1, updated=now)
            rows = db.execute(SELECT + " WHERE id = ?", (run,)).fetchall()
        return _row(rows[0]) if rows else None

    def finish(
        self,
        run: str,
        *,
        status: str,
        stop_reason: str | None,
        body: JsonObject | None,
        events: Sequence[tuple[int, str]],
        now: float,
        was: Collection[str] = ("running",),
        text: str | None = None,
    ) -> bool:
        """End a running run (`done`, `paused` or `cancelled`) with its last events and its
        result, in one transaction; False (nothing written) if it was not running. The
        result of a run that ended is a row of `results`, that of a pause (the run goes
        on) is kept in the run's row. `was`: the statuses it may end from (a run its
        worker could not start is ended from `queued`). `text`: `body` as JSON, when the
        caller encoded it (`result_json`)."""
        if text is None and body is not None:
            text = result_json(body) or json.dumps(body)
        self._committed(run)
        with self._transaction() as db:
            return self._ending(
                run, status, stop_reason=stop_reason, text=text, events=events, now=now, was=was
            )(db)

    def finish_later(
        self,
        run: str,
        *,
        status: str,
        stop_reason: str | None,
        body: JsonObject | None,
        events: Sequence[tuple[int, str]],
        now: float,
        text: str | None = None,
    ) -> Future[bool]:
        """`finish` a running run in the checkpoint journals' next group commit, sharing
        its transaction instead of paying one of its own: whether it was written, once
        that group is committed (`StateError` when it failed), as `finish` answers."""
        if text is None and body is not None:
            text = result_json(body) or json.dumps(body)
        future: Future[bool] = Future()

        def done(stored: bool, error: BaseException | None) -> None:
            if error is None:
                future.set_result(stored)
            else:
                future.set_exception(StateError(f"cannot write the state: {error}"))

        try:
            ending = self._ending(
                run,
                status,
                stop_reason=stop_reason,
                text=text,
                events=events,
                now=now,
                was=("running",),
            )
            self.checkpoints.queue_write(ending, done)
        except sqlite3.Error as exc:
            done(False, exc)
        return future

    def _ending(
        self,
        run: str,
        status: str,
        *,
        stop_reason: str | None,
        text: str | None,
        events: Sequence[tuple[int, str]],
        now: float,
        was: Collection[str],
    ) -> Callable[[sqlite3.Connection], bool]:
        """The write ending `run` (see `finish`), to run in a transaction; it takes the
        run's queued journal writes now (so none lands after its end)."""
        marks = ", ".join("?" * len(was))
        ended = text is not None and status != "paused"
        last = self.event_statements(run, events)
        # a pause keeps its last records, an end drops the journal; the events
        # queued with the journal's records and the last ones: one statement
        journal = (
            [*self.checkpoints.take(run), *last]
            if status == "paused"
            else self.checkpoints.removal(run, after=last)
        )

        def write(db: sqlite3.Connection) -> bool:
            cursor = db.execute(
                "UPDATE runs SET status = ?, stop_reason = ?, decisions = NULL, result = ?, "
                f"updated = ? WHERE id = ? AND status IN ({marks})",
                (status, stop_reason, None if ended else text, now, run, *was),
            )
            if cursor.rowcount != 1:
                return False  # nothing written: the transaction commits nothing of it
            if ended:
                db.execute("INSERT INTO results (run, body, at) VALUES (?, ?, ?)", (run, text, now))
            execute_all(db, journal)
            if status == "paused" or events:  # every number given is below its events
                db.execute(SETTLED_SENT, (run, run))
            return True

        return write

    def cancel(self, run: str, now: float) -> bool:
        """Cancel a queued or paused run at once (its journal removed with it, and a
        pause's result: a cancelled run has none); False if it is in another state."""
        self._committed(run)
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE runs SET status = 'cancelled', stop_reason = 'cancelled', result = NULL, "
                "decisions = NULL, updated = ? WHERE id = ? AND status IN ('queued', 'paused')",
                (now, run),
            )
            if cursor.rowcount == 1:
                execute_all(db, self.checkpoints.removal(run))
        return cursor.rowcount == 1

    def decide(self, run: str, decisions: Mapping[str, bool], now: float) -> bool:
        """Queue a paused run again with `decisions`; False if it is not paused. The pause's
        stop reason and result go: a queued (then running) run has none until it stops."""
        self._committed(run)
        with self._transaction(autocommit=True) as db:
            cursor = db.execute(
                "UPDATE runs SET status = 'queued', stop_reason = NULL, result = NULL, "
                "decisions = ?, updated = ? WHERE id = ? AND status = 'paused'",
                (json.dumps(dict(decisions)), now, run),
            )
        return cursor.rowcount == 1

    def requeue(self, run: str, now: float) -> bool:
        """Queue a running run again (its worker died: it continues from its journal);
        False if it is not running."""
        self._committed(run)
        with self._transaction(autocommit=True) as db:
            cursor = db.execute(
                "UPDATE runs SET status = 'queued', updated = ? "
                "WHERE id = ? AND status = 'running'",
                (now, run),
            )
        return cursor.rowcount == 1

    def recover(self, now: float) -> list[RunRow]:
        """After a restart: running runs are queued again (numbering their events past
        every number sent: `next_event`); every queued run, oldest first. The events and
        journal of a run that was never stored go (a kill took its add, queued with the
        group, after a worker committed records of it or its events were flushed)."""
        self._write(
            [
                ("UPDATE runs SET status = 'queued', updated = ? WHERE status = 'running'", (now,)),
                ("DELETE FROM events WHERE run NOT IN (SELECT id FROM runs)", ()),
                ("DELETE FROM sent WHERE run NOT IN (SELECT id FROM runs)", ()),
                *self.checkpoints.removal_unless("SELECT id FROM runs"),
            ]
        )
        return self.runs("queued")

    # --- results -----------------------------------------------------------------------

    def results(self, run: str) -> list[JsonObject]:
        """Every result recorded for `run` (one for a run that ended; more would be a fault)."""
        rows = self._read("SELECT body FROM results WHERE run = ? ORDER BY rowid", (run,))
        return [json.loads(body) for (body,) in rows]


def _adding(
    run: str,
    pipeline: str,
    request: JsonObject,
    now: float,
    idempotency: tuple[str, str] | None,
    *,
    seq: int,
    running: bool,
) -> tuple[list[Statement], RunRow]:
    """The statements adding a run (`RunStore.add`) and the run as they store it."""
    text = json.dumps(request)
    status, attempts = ("running", 1) if running else ("queued", 0)
    statements = add_statements(
        run, pipeline, text, seq=seq, status=status, attempts=attempts, now=now, key=idempotency
    )
    row = RunRow(run, pipeline, json.loads(text), status, None, {}, attempts, None, now, now)
    return statements, row


def result_json(body: JsonObject) -> str | None:
    """`body` as the store writes it (`json.dumps`), when that is JSON an answer may send
    as it is; None when it holds a number JSON cannot (NaN, infinities), which the store
    then writes as `json.dumps` does and an answer refuses as `JSONResponse` does."""
    try:
        return json.dumps(body, allow_nan=False)
    except ValueError:
        return None


def _row(row: tuple[Any, ...]) -> RunRow:
    ident, pipeline, request, status, reason, decisions, attempts, result, created, updated = row
    return RunRow(
        id=ident,
        pipeline=pipeline,
        request=json.loads(request),
        status=status,
        stop_reason=reason,
        decisions=json.loads(decisions) if decisions else {},
        attempts=int(attempts),
        result=json.loads(result) if result else None,
        created=float(created),
        updated=float(updated),
    )
