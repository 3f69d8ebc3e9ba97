"""Where a checkpoint journal is kept: the port (`JournalMedium`) and its folder adapter.

A `CheckpointStore` (`_checkpoint`) makes and verifies the journal's records
(MAC-chained lines, `_journal`); a medium only keeps them. Its contract, which
every adapter meets and `tests/runtime/test_checkpoint.py` checks on each:

- `read()` gives the journal's bytes, the records in order (`FileNotFoundError`
  when there is none); `replace(line)` makes the journal that one record,
  atomically (a reader sees the old journal or the new one); `reopen(end)`
  continues a journal read before, its bytes after `end` (a torn last record)
  dropped; `append(line)` adds one record; `flush()` waits until every
  record is durable; `close()` releases it. When a record survives a killed
  process is the adapter's: the folder's as soon as `append` returns (and
  `close` flushes), SQLite's once its group is committed (at most
  `GROUP_COMMIT_S` later, at `flush`, or with its owner's transaction). A
  record lost so is a cycle the resumed run does again.
- The sealed decisions of a paused run are one more record beside the
  journal: `read_decisions()` (None when there are none), `write_decisions`,
  `clear_decisions`.
- `hold(option)` is held for the whole of one run: a second run on the same
  journal is refused with a `UsageError` naming `option`.
- `where` names it in messages (`decisions_where` its decisions).

`FolderJournal` is `--checkpoint DIR`: `DIR/checkpoint.jsonl` appended with
one `write` and fdatasynced by a background thread (`_journal.Appender`),
replaced by temp file + rename, `DIR/decisions.json`, and `flock` on
`DIR/.lock`. `converge_dsl.runtime.SqliteJournals` keeps journals in a
SQLite database instead (`_checkpoint_sqlite`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from converge_dsl._reading import read_bytes

from ._checkpoint_folder import folder_lock
from ._journal import Appender, atomic_write

CHECKPOINT_FILE = "checkpoint.jsonl"
DECISIONS_FILE = "decisions.json"
_DECISIONS_CAP = 16 << 20


class JournalMedium(Protocol):
    """Where one checkpoint journal is kept (see the module docstring)."""

    @property
    def where(self) -> str: ...

    @property
    def decisions_where(self) -> str: ...

    def read(self) -> bytes: ...

    def replace(self, line: bytes) -> None: ...

    def reopen(self, end: int) -> None: ...

    def append(self, line: bytes) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    def read_decisions(self) -> bytes | None: ...

    def write_decisions(self, line: bytes) -> None: ...

    def clear_decisions(self) -> None: ...

    def hold(self, option: str) -> contextlib.AbstractContextManager[None]: ...


class FolderJournal:
    """The journal of a checkpoint folder (`--checkpoint DIR`; see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._out: Appender | None = None

    @property
    def where(self) -> str:
        return str(self.folder)

    @property
    def decisions_where(self) -> str:
        return str(self.folder / DECISIONS_FILE)

    @property
    def file(self) -> Path:
        return self.folder / CHECKPOINT_FILE

    def read(self) -> bytes:
        return read_bytes(self.file, "checkpoint journal")

    def replace(self, line: bytes) -> None:
        self.close()
        atomic_write(self.folder, CHECKPOINT_FILE, line)
        self._out = Appender(self.file, len(line))

    def reopen(self, end: int) -> None:
        self.close()
        self._out = Appender(self.file, end)

    def append(self, line: bytes) -> None:
        assert self._out is not None, "append after replace or reopen"
        self._out.append(line)

    def flush(self) -> None:
        if self._out is not None:
            self._out.flush()

    def close(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            out.close()

    def read_decisions(self) -> bytes | None:
        try:
            return read_bytes(self.folder / DECISIONS_FILE, "decisions file", cap=_DECISIONS_CAP)
        except FileNotFoundError:
            return None

    def write_decisions(self, line: bytes) -> None:
        atomic_write(self.folder, DECISIONS_FILE, line)

    def clear_decisions(self) -> None:
        (self.folder / DECISIONS_FILE).unlink(missing_ok=True)

    @contextlib.contextmanager
    def hold(self, option: str) -> Iterator[None]:
        with folder_lock(self.folder, option):
            yield
