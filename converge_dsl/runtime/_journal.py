"""MAC-chained, append-only JSON lines: the file format of checkpoints (docs/architecture.md §12).

Each record is one line, `{"mac":"<64 hex>","record":<body>}` + newline, where
`<body>` is canonical JSON and

    mac[i] = HMAC-SHA256(key, mac[i-1] + "\\n" + body[i])      (mac[-1] = "")

so a record cannot be edited, and no record can be removed from the middle
or moved, without the key. The MAC covers the exact bytes of the body, so
reading never re-serialises anything, and a body need not be canonical:
`encode` writes it with pydantic's JSON writer (a fifth of `json.dumps`'s
time with sorted keys, `bench/checkpoint.py`), in the order of its keys.

- `Appender` writes one whole line with one `write` on an `O_APPEND`
  descriptor, and fdatasyncs it from a background thread (group commit): a
  record survives a killed run at once, and the disk, not the run, waits for
  the sync.
- `atomic_write` replaces a file by temp file + fsync + rename + fsync of the
  folder: readers see the old file or the new one, never half of one.
- `read_journal` verifies every complete line; a last line without its newline
  (a run killed mid-append) is torn: it is left out and reported by offset so
  the writer can cut it before appending again.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import hmac
import json
import os
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import to_json

from converge_dsl import codes
from converge_dsl._reading import read_bytes
from converge_dsl.errors import RunError

from ._checkpoint_key import CheckpointRefused, key_id

_PREFIX = b'{"mac":"'
_MIDDLE = b'","record":'
_MAC_HEX = 64
_BODY_AT = len(_PREFIX) + _MAC_HEX + len(_MIDDLE)


def encode(body: Mapping[str, Any]) -> bytes:
    """`body` (JSON data) as one line of JSON text in UTF-8, decoding to `body`.

    Text JSON can hold but UTF-8 cannot (a lone surrogate) is written escaped,
    by `json.dumps`; so is a value pydantic refuses (which `json.dumps` then
    refuses too, as it did). `body` must be JSON data: pydantic writes a set,
    a Decimal or a key that is not a string as something else, so the store
    checks what the promotion gate does not (suggestor states, `_checkpoint`).
    """
    try:
        return to_json(body)
    except ValueError:  # PydanticSerializationError: a lone surrogate, too deep a nesting
        return json.dumps(body, separators=(",", ":")).encode("ascii")


# hashlib lets go of the GIL to hash a buffer of this many bytes or more.
_GIL_MINSIZE = 2048
# Bodies up to this size are hashed in pieces shorter than `_GIL_MINSIZE`, keeping the GIL.
_HELD_UP_TO = 64 << 10


def seal(key: bytes, previous: str, body: bytes) -> tuple[str, bytes]:
    """The MAC of `body` chained after `previous`, and the whole line to write.

    A body of a few kilobytes (a cycle's record) is hashed holding the GIL, in
    pieces: hashlib lets go of it for a buffer of 2 KiB or more, and a busy
    thread beside (a service's) then keeps it for up to the switch interval
    (5 ms) before the run gets it back, for a hash of microseconds
    (`bench/checkpoint.py`, seal beside a busy thread). A large body (a
    snapshot) is hashed at once, letting go of the GIL as hashlib does.
    """
    keyed = _keyed(key).copy()
    keyed.update(previous.encode("ascii") + b"\n")
    size = len(body)
    if size < _GIL_MINSIZE or size > _HELD_UP_TO:
        keyed.update(body)
    else:
        view = memoryview(body)
        for at in range(0, size, _GIL_MINSIZE - 1):
            keyed.update(view[at : at + _GIL_MINSIZE - 1])
    mac = keyed.hexdigest()
    return mac, b"".join((_PREFIX, mac.encode("ascii"), _MIDDLE, body, b"}\n"))


@functools.lru_cache(maxsize=16)
def _keyed(key: bytes) -> hmac.HMAC:
    """An HMAC-SHA256 of `key` over nothing yet, copied for each record: the key is set
    up once (a one-shot `hmac.digest` sets it up on every call, and lets go of the GIL
    for it, which a service running runs on several threads pays for)."""
    return hmac.new(key, digestmod=hashlib.sha256)


@dataclass(frozen=True, slots=True)
class Record:
    """One verified record: its number (0 = the first line), body and MAC."""

    number: int
    body: dict[str, Any]
    mac: str


@dataclass(frozen=True, slots=True)
class JournalRead:
    """The verified records of a journal; `end` is the byte offset after the last one."""

    records: tuple[Record, ...]
    end: int
    torn: bool


def _describe(number: int, body: bytes) -> str:
    """`record N (cycle C)`, the cycle read best-effort from an unverified body."""
    try:
        cycle = json.loads(body).get("cycle")
    except (ValueError, AttributeError, RecursionError):
        cycle = None
    return f"record {number}" + (f" (cycle {cycle})" if isinstance(cycle, int) else "")


def _bad_mac(where: str, key: bytes, number: int, body: bytes) -> CheckpointRefused:
    if number == 0:
        try:
            sealed_with = json.loads(body).get("key_id")
        except (ValueError, AttributeError, RecursionError):
            sealed_with = None
        if isinstance(sealed_with, str) and sealed_with != key_id(key):
            return CheckpointRefused(
                codes.CHECKPOINT_OTHER_KEY,
                f"{where!r} was sealed with another key (key id {sealed_with}; "
                f"this user's key id is {key_id(key)})",
                hint="resume as the user who made it, with the same config folder",
            )
    return CheckpointRefused(
        codes.CHECKPOINT_TAMPERED,
        f"{_describe(number, body)} of {where!r} does not match its MAC: it was edited, "
        "or records were removed or reordered",
        hint="a checkpoint is only read as written; start the run again without --resume",
    )


def _corrupt(where: str, what: str) -> CheckpointRefused:
    return CheckpointRefused(
        codes.CHECKPOINT_CORRUPT,
        f"checkpoint {where!r} is torn or corrupt: {what}; it is not read",
        hint="start the run again without --resume",
    )


def read_journal(path: Path, key: bytes) -> JournalRead:
    """Every complete record of `path`, verified; `CheckpointRefused` (CD950, 951, 953) else.

    Raises `FileNotFoundError` when there is no file (the caller says what that means).
    """
    return parse_journal(read_bytes(path, "checkpoint journal"), key, str(path))


def parse_journal(raw: bytes, key: bytes, where: str) -> JournalRead:
    """Every complete record of the journal bytes `raw` (read from `where`), verified."""
    cut = raw.rfind(b"\n") + 1
    records: list[Record] = []
    previous, start = "", 0
    while start < cut:
        stop = raw.index(b"\n", start) + 1
        line = raw[start:stop]
        number = len(records)
        if not (
            line.startswith(_PREFIX)
            and line[_BODY_AT - len(_MIDDLE) : _BODY_AT] == _MIDDLE
            and line.endswith(b"}\n")
        ):
            raise _corrupt(where, f"record {number} is not a sealed record")
        mac, body = line[len(_PREFIX) : len(_PREFIX) + _MAC_HEX], line[_BODY_AT:-2]
        expected, _ = seal(key, previous, body)
        if not hmac.compare_digest(expected.encode("ascii"), mac):
            raise _bad_mac(where, key, number, body)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            raise _corrupt(where, f"record {number} is not a JSON object")
        records.append(Record(number, data, expected))
        previous, start = expected, stop
    if not records:
        raise _corrupt(where, "it holds no complete record")
    return JournalRead(tuple(records), cut, torn=cut < len(raw))


def _write_error(path: Path, exc: OSError) -> RunError:
    return RunError(
        f"cannot write {path.name} in checkpoint folder {str(path.parent)!r}: "
        f"{exc.strerror or exc}; the run stopped",
        hint="free space or fix the folder; the checkpoint of the last completed cycle "
        "is kept (continue with --resume DIR)",
    )


def atomic_write(folder: Path, name: str, data: bytes) -> None:
    """Replace `folder/name` by temp file + fsync + rename + fsync of the folder.

    Through `converge_dsl._files.replace_file`: the temporary file is made
    new (`O_EXCL | O_NOFOLLOW`), so one planted in the folder is never
    written through. A failure (full disk, folder gone) raises `RunError` and leaves the previous
    `folder/name` as it was; the temp file is removed.
    """
    from converge_dsl._files import replace_file

    try:
        folder.mkdir(parents=True, exist_ok=True)
        replace_file(folder / name, data, sync_folder=True)
    except OSError as exc:
        raise _write_error(folder / name, exc) from None


# How long the sync thread gathers appends into one fdatasync.
GROUP_COMMIT_S = 0.05


class Appender:
    """Appends whole lines to a journal; a background thread fdatasyncs them (group commit).

    `append` writes the line at once with one `write` (so a run killed after it
    keeps the record: it is in the kernel's page cache) and asks the sync
    thread for an `fdatasync`, which covers every line written before it
    started; while one runs, later appends wait for the next one. So every
    record is fdatasynced, without the run waiting for the disk each cycle:
    a power loss can lose at most the records of the last `GROUP_COMMIT_S`
    and of the sync in progress, and a resume then starts from the record
    before them (a killed process loses none: they are written). The thread
    gathers the appends of `GROUP_COMMIT_S` into one sync and is woken only
    when idle: a thread woken at every cycle fights the run for the
    interpreter lock, which cost more than the records. `flush` waits for every
    record so far; `close` flushes, stops the thread and closes the file. A
    failed write or sync raises `RunError` (at that append, or the next
    `append`/`flush`/`close`).
    """

    def __init__(self, path: Path, end: int) -> None:
        """Append to `path`, cut first at `end` (drops a torn last line)."""
        self.path = path
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError as exc:
            raise _write_error(path, exc) from None
        try:
            info = os.fstat(self._fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
                # A hard link would carry the appends to the file's other name too.
                raise OSError(errno.EPERM, "it is not a regular file with a single link")
            if info.st_size != end:
                os.ftruncate(self._fd, end)
                os.fsync(self._fd)
        except OSError as exc:
            os.close(self._fd)
            raise _write_error(path, exc) from None
        self._cond = threading.Condition()
        self._wanted = self._synced = 0
        self._error: OSError | None = None
        self._closing = self._flushing = False
        self._idle = False  # the sync thread waits for a first append
        self._thread = threading.Thread(target=self._sync_loop, name="checkpoint-sync", daemon=True)
        self._thread.start()

    def append(self, line: bytes) -> None:
        """Write `line` (all of it) and have it fdatasynced; `RunError` on any failure."""
        self._raise_failure()
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            raise _write_error(self.path, exc) from None
        with self._cond:
            self._wanted += 1
            if self._idle:
                self._cond.notify_all()

    def flush(self) -> None:
        """Wait until every line appended so far is fdatasynced."""
        with self._cond:
            self._flushing = True
            self._cond.notify_all()
            while self._synced < self._wanted and self._error is None:
                self._cond.wait()
            self._flushing = False
        self._raise_failure()

    def close(self) -> None:
        """Flush, stop the sync thread and close the file (`RunError` if a sync failed)."""
        try:
            self.flush()
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._thread.join()
            os.close(self._fd)

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise _write_error(self.path, self._error)

    def _sync_loop(self) -> None:
        while True:
            with self._cond:
                self._idle = True
                while self._synced == self._wanted and not self._closing:
                    self._cond.wait()
                self._idle = False
                if self._synced == self._wanted or self._error is not None:
                    return
                self._gather()
                target = self._wanted
            try:
                os.fdatasync(self._fd)
            except OSError as exc:
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                return
            with self._cond:
                self._synced = target
                self._cond.notify_all()

    def _gather(self) -> None:
        """Wait (holding `_cond`) up to `GROUP_COMMIT_S` for more appends; at once on flush."""
        deadline = time.monotonic() + GROUP_COMMIT_S
        while not (self._flushing or self._closing):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)
