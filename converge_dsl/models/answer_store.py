"""Where cached answers live: the `AnswerStore` port, its SQLite adapter and a fake.

A row holds one answer: its key (`_answer_key.answer_key`), the kind of call,
the callee's identity and the request (canonical JSON, so a miss can be
explained against the nearest row), the answer's value (JSON), when it was
stored and how long the call took, when it was last used, its size, and a
digest (sha256 over format, key, request and value). `verify(row)` checks a row
as it is read: a row of another format, with a digest that does not match
(corrupt, truncated, copied under another key) or a value that is not JSON is
a problem, never an answer. A row edited by hand reads all the same: text that
is not UTF-8 is read with replacement characters (so its digest fails), a time
or size that is not a number as 0 and a format that is not one as -1 (a row of
no format), never an exception that would hide every other row.

`SqliteAnswerStore` keeps the rows in one SQLite file (stdlib `sqlite3`) in
WAL mode, so several processes on one machine read and write the same file at
once (each write is one short transaction; a writer waits up to
`BUSY_TIMEOUT_S` for another), and the runs of one process on several
threads share one connection, one operation at a time. Its size is bounded: a `put` past `max_bytes`
removes the least recently used rows until the rows fill at most 90 % of it.
A `get` marks its row used waiting at most `MARK_TIMEOUT_S` for another
process's write lock (a read never waits 30 s for bookkeeping); a mark that
could not be written then is kept and written by the next `put` or `prune` of
this store, in its own transaction, so a row just used is never the least
recently used one to an LRU prune.
`MemoryAnswerStore` keeps rows in a dict, for tests. Every failure of SQLite
is a `CacheStoreError` (a `ConvergeError`), never a `sqlite3` exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from converge_dsl import codes
from converge_dsl._escapes import shell_word
from converge_dsl._sqlite import open_wal
from converge_dsl.errors import ConvergeError
from converge_dsl.models._answer_key import CACHE_FORMAT

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
BUSY_TIMEOUT_S = 30.0
MARK_TIMEOUT_S = 0.075  # how long a `get` waits to mark its row used (see the docstring)
STORE_FILE = "answers.sqlite3"
NO_FORMAT = -1  # the format of a stored row whose format column is not a number


class CacheStoreError(ConvergeError):
    """The cache's store could not be opened, read or written; `damaged` when its file
    is no SQLite database, a corrupt one or one of another shape (`discard` removes it)."""

    exit_code = 3
    code = codes.CACHE_STORE_FAILED

    def __init__(self, message: str, *, hint: str | None = None, damaged: bool = False) -> None:
        super().__init__(message, hint=hint)
        self.damaged = damaged


# SQLite's primary result codes of a file that is no database, or a corrupt one
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_STORE_FILES = ("", "-wal", "-shm", "-journal")  # the database and SQLite's files beside it
# What to do about a failure of a store that opened, by SQLite's primary result code
# (`cache clear` would fail the same way for each of these).
_NOT_WRITABLE = (
    "the file or its folder cannot be written: check their permissions, or give another "
    "folder with --cache-dir"
)
_HELD = "another process held the cache past the busy timeout: try again"
_HELD_CODES = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
_FIXES = {
    sqlite3.SQLITE_READONLY: _NOT_WRITABLE,
    sqlite3.SQLITE_CANTOPEN: _NOT_WRITABLE,
    sqlite3.SQLITE_FULL: "the disk is full: free some space, or `converge-dsl cache prune "
    "--max-bytes N` to keep less",
    sqlite3.SQLITE_IOERR: "the disk failed to read or write the file: check the disk",
    sqlite3.SQLITE_BUSY: _HELD,
    sqlite3.SQLITE_LOCKED: _HELD,
}


@dataclass(frozen=True, slots=True)
class CacheRow:
    """One stored answer as the store keeps it (see the module docstring)."""

    key: str
    kind: str
    identity: str
    suggestor: str | None
    request: str
    value: str
    created: float
    duration_s: float
    last_used: float
    format: int = CACHE_FORMAT
    digest: str = ""

    @property
    def size(self) -> int:
        return len(self.request) + len(self.value) + len(self.identity)

    def sealed(self) -> CacheRow:
        """This row with its digest."""
        return replace(self, digest=row_digest(self))


def row_digest(row: CacheRow) -> str:
    text = "\0".join((str(row.format), row.key, row.kind, row.identity, row.request, row.value))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verify(row: CacheRow) -> str | None:
    """Why `row` cannot be trusted as an answer, or None when it can."""
    if row.format == NO_FORMAT:
        return "its format column holds no format number (the row was edited)"
    if row.format != CACHE_FORMAT:
        return f"it was written in cache format {row.format}, not {CACHE_FORMAT}"
    if row.digest != row_digest(row):
        return "its digest does not match its content (corrupt, truncated or foreign)"
    try:
        json.loads(row.value)
        json.loads(row.request)
    except ValueError:
        return "its value is not JSON"
    return None


@dataclass(frozen=True, slots=True)
class StoreStats:
    entries: int
    bytes: int
    max_bytes: int
    location: str
    kinds: tuple[tuple[str, int], ...] = ()  # (kind, entries), by kind: `model`, `tool`


class AnswerStore(Protocol):
    """The port of the answer cache's storage."""

    def get(self, key: str, now: float) -> CacheRow | None:
        """The row of `key` (marked used at `now`), unchecked; None when there is none."""
        ...

    def put(self, row: CacheRow) -> None:
        """Store `row` (sealed), replacing one of the same key; prune past the size bound."""
        ...

    def rows(self, suggestor: str | None = None, kind: str | None = None) -> list[CacheRow]:
        """Rows, most recently used first (only `suggestor`'s / `kind`'s when given)."""
        ...

    def delete(self, key: str) -> bool: ...

    def prune(self, max_bytes: int) -> int:
        """Remove least recently used rows until they fill at most `max_bytes`; how many."""
        ...

    def clear(self) -> int: ...

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...


class MemoryAnswerStore:
    """An `AnswerStore` in memory (tests); rows may be replaced by hand to corrupt them."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.data: dict[str, CacheRow] = {}

    def get(self, key: str, now: float) -> CacheRow | None:
        row = self.data.get(key)
        if row is not None:
            self.data[key] = replace(row, last_used=now)
        return row

    def put(self, row: CacheRow) -> None:
        self.data[row.key] = row.sealed()
        if sum(r.size for r in self.data.values()) > self.max_bytes:
            self.prune(self.max_bytes * 9 // 10)

    def rows(self, suggestor: str | None = None, kind: str | None = None) -> list[CacheRow]:
        found = [
            r
            for r in self.data.values()
            if (suggestor is None or r.suggestor == suggestor) and (kind is None or r.kind == kind)
        ]
        return sorted(found, key=lambda r: -r.last_used)

    def delete(self, key: str) -> bool:
        return self.data.pop(key, None) is not None

    def prune(self, max_bytes: int) -> int:
        removed = 0
        for row in sorted(self.data.values(), key=lambda r: r.last_used):
            if sum(r.size for r in self.data.values()) <= max_bytes:
                break
            del self.data[row.key]
            removed += 1
        return removed

    def clear(self) -> int:
        count = len(self.data)
        self.data.clear()
        return count

    def stats(self) -> StoreStats:
        size = sum(r.size for r in self.data.values())
        kinds: dict[str, int] = {}
        for row in self.data.values():
            kinds[row.kind] = kinds.get(row.kind, 0) + 1
        return StoreStats(
            len(self.data), size, self.max_bytes, "memory", tuple(sorted(kinds.items()))
        )

    def close(self) -> None:
        return None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key TEXT PRIMARY KEY,
    format INTEGER NOT NULL,
    kind TEXT NOT NULL,
    identity TEXT NOT NULL,
    suggestor TEXT,
    request TEXT NOT NULL,
    value TEXT NOT NULL,
    digest TEXT NOT NULL,
    created REAL NOT NULL,
    duration_s REAL NOT NULL,
    last_used REAL NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_by_use ON answers (last_used);
CREATE INDEX IF NOT EXISTS answers_by_suggestor ON answers (suggestor, last_used);
"""
_TOTAL_SIZE = "SELECT COALESCE(SUM(CAST(size AS INTEGER)), 0) FROM answers"
_COLUMNS = (
    "key, kind, identity, suggestor, request, value, created, duration_s, last_used, format, digest"
)


def _row(values: tuple[object, ...]) -> CacheRow:
    """A stored row as a `CacheRow`, whatever a hand edit left in its columns (see the
    module docstring)."""
    key, kind, identity, suggestor, request, value, created, duration, used, fmt, digest = values
    return CacheRow(
        key=_text(key),
        kind=_text(kind),
        identity=_text(identity),
        suggestor=None if suggestor is None else _text(suggestor),
        request=_text(request),
        value=_text(value),
        created=_seconds(created),
        duration_s=_seconds(duration),
        last_used=_seconds(used),
        format=fmt if type(fmt) is int else NO_FORMAT,
        digest=_text(digest),
    )


def _text(value: object) -> str:
    """A column's value as text; bytes (SQLite's TEXT, as the connection's `text_factory`,
    or a BLOB) that are not UTF-8 get replacement characters, so the row fails its digest
    rather than failing the whole query."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _seconds(value: object) -> float:
    """A REAL column's value; 0 for anything else (not a finite number)."""
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return 0.0


class SqliteAnswerStore:
    """An `AnswerStore` in `folder`/answers.sqlite3 (see the module docstring)."""

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = folder
        self.path = folder / STORE_FILE
        self.max_bytes = max_bytes
        self._lock = threading.RLock()
        self._marks: dict[str, float] = {}  # key -> when used, not written yet (under _lock)
        cannot = f"answer cache: cannot open {str(self.path)!r}"
        writable = "give a writable folder with --cache-dir, or run without --cache"
        if folder.exists() and not folder.is_dir():
            raise CacheStoreError(
                f"{cannot}: {str(folder)!r} is a file, not a folder",
                hint="give --cache-dir a folder, or move the file away",
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = open_wal(self.path, BUSY_TIMEOUT_S)
            self._db.text_factory = _text
        except (OSError, sqlite3.Error) as exc:
            if isinstance(exc, sqlite3.Error) and _primary(exc) in _DAMAGED:
                raise self._damaged(f"{cannot}: {exc}") from None
            raise CacheStoreError(f"{cannot}: {exc}", hint=writable) from None
        try:
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            self._db.close()
            if _primary(exc) in {sqlite3.SQLITE_ERROR, *_DAMAGED}:  # a table of another shape
                raise self._damaged(
                    f"{cannot}: it is no answer cache of this version ({exc})"
                ) from None
            raise CacheStoreError(f"{cannot}: {exc}", hint=writable) from None

    def _damaged(self, message: str) -> CacheStoreError:
        clear = f"converge-dsl cache clear --cache-dir {shell_word(str(self.folder))}"
        return CacheStoreError(
            message,
            hint=f"`{clear}` removes it (its entries are lost; each is asked again), or give "
            "another folder with --cache-dir",
            damaged=True,
        )

    @staticmethod
    def discard(folder: Path) -> list[Path]:
        """Remove the store's files in `folder` (a damaged store: see `CacheStoreError`),
        answering those removed."""
        removed = []
        for suffix in _STORE_FILES:
            path = folder / (STORE_FILE + suffix)
            if path.is_file():
                path.unlink()
                removed.append(path)
        return removed

    @contextlib.contextmanager
    def _guard(self, doing: str) -> Iterator[sqlite3.Connection]:
        """One operation at a time on the connection (runs on several threads share it)."""
        try:
            with self._lock:
                yield self._db
        except sqlite3.Error as exc:
            message = f"answer cache: {str(self.path)!r} failed while {doing}: {exc}"
            code = _primary(exc)
            if code in _DAMAGED:
                raise self._damaged(message) from None
            hint = None if code is None else _FIXES.get(code)
            raise CacheStoreError(message, hint=hint) from None

    def get(self, key: str, now: float) -> CacheRow | None:
        """The row of `key`, marked used: at once unless another process holds the write
        lock past `MARK_TIMEOUT_S` (WAL reads past a writer, and waiting `BUSY_TIMEOUT_S`
        would have lost the answer for a bookkeeping write), else by the next `put` or
        `prune` (the mark is kept until then)."""
        with self._guard("reading"):
            found = self._db.execute(
                f"SELECT {_COLUMNS} FROM answers WHERE key = ?", (key,)
            ).fetchone()
            if found is None:
                return None
            self._marks[key] = max(now, self._marks.get(key, now))
            self._db.execute(f"PRAGMA busy_timeout = {int(MARK_TIMEOUT_S * 1000)}")
            try:
                self._write_marks()
            except sqlite3.OperationalError as exc:
                if _primary(exc) not in _HELD_CODES:
                    raise
            finally:
                self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        return _row(tuple(found))

    def _write_marks(self) -> None:
        """Write the kept marks (under `_lock`); they stay kept if SQLite refuses."""
        if self._marks:
            self._db.executemany(
                "UPDATE answers SET last_used = MAX(last_used, ?) WHERE key = ?",
                [(when, key) for key, when in self._marks.items()],
            )
            self._marks.clear()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction holding the write lock, the kept marks written first."""
        marks = dict(self._marks)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._write_marks()
            yield
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            self._marks = marks | self._marks
            raise

    def put(self, row: CacheRow) -> None:
        sealed = row.sealed()
        with self._guard("writing"), self._transaction():
            self._db.execute(
                f"INSERT OR REPLACE INTO answers ({_COLUMNS}, size) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sealed.key,
                    sealed.kind,
                    sealed.identity,
                    sealed.suggestor,
                    sealed.request,
                    sealed.value,
                    sealed.created,
                    sealed.duration_s,
                    sealed.last_used,
                    sealed.format,
                    sealed.digest,
                    sealed.size,
                ),
            )
            total = self._db.execute(_TOTAL_SIZE).fetchone()[0]
        if int(total) > self.max_bytes:
            self.prune(self.max_bytes * 9 // 10)

    def rows(self, suggestor: str | None = None, kind: str | None = None) -> list[CacheRow]:
        where, args = [], []
        if suggestor is not None:
            where.append("suggestor = ?")
            args.append(suggestor)
        if kind is not None:
            where.append("kind = ?")
            args.append(kind)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        with self._guard("listing"):
            found = self._db.execute(
                f"SELECT {_COLUMNS} FROM answers{clause} ORDER BY last_used DESC", args
            ).fetchall()
        return [_row(tuple(values)) for values in found]

    def delete(self, key: str) -> bool:
        with self._guard("deleting"):
            return self._db.execute("DELETE FROM answers WHERE key = ?", (key,)).rowcount > 0

    def prune(self, max_bytes: int) -> int:
        """One transaction: the oldest rows past `max_bytes` go (see the protocol)."""
        with self._guard("pruning"), self._transaction():
            removed = 0
            total = self._db.execute(_TOTAL_SIZE).fetchone()
            excess = int(total[0]) - max_bytes
            if excess > 0:
                doomed: list[str] = []
                for key, size in self._db.execute(
                    "SELECT key, CAST(size AS INTEGER) FROM answers ORDER BY last_used ASC"
                ):
                    if excess <= 0:
                        break
                    doomed.append(str(key))
                    excess -= int(size)
                self._db.executemany("DELETE FROM answers WHERE key = ?", [(k,) for k in doomed])
                removed = len(doomed)
        return removed

    def clear(self) -> int:
        with self._guard("clearing"):
            return self._db.execute("DELETE FROM answers").rowcount

    def stats(self) -> StoreStats:
        with self._guard("counting"):
            count, size = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(CAST(size AS INTEGER)), 0) FROM answers"
            ).fetchone()
            kinds = self._db.execute(
                "SELECT kind, COUNT(*) FROM answers GROUP BY kind ORDER BY kind"
            ).fetchall()
        return StoreStats(
            int(count),
            int(size),
            self.max_bytes,
            str(self.path),
            tuple((str(kind), int(n)) for kind, n in kinds),
        )

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()


def _primary(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of `exc` (its extended code's low byte), if known."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def default_cache_dir() -> Path:
    """The user cache folder's `answers` folder (platformdirs)."""
    import platformdirs

    return platformdirs.user_cache_path("converge-dsl") / "answers"
