"""MAC-chained, append-only JSON lines: the file format of checkpoints (docs/architecture.md §12).

Each record is one line, `{"mac":"<64 hex>","record":<body>}` + newline, where
`<body>` is canonical JSON and

    mac[i] = HMAC-SHA256(key, mac[i-1] + "\\n" + body[i])      (mac[-1] = "")

so a record cannot be edited, and no record can be removed from the middle
or moved, without the key. The MAC covers the exact bytes of the body, so
reading never re-serialises anything.

- `append_line` writes one whole line with one `write` on an `O_APPEND`
  descriptor, then `fdatasync`: each record is durable before the run goes on.
- `atomic_write` replaces a file by temp file + fsync + rename + fsync of the
  folder: readers see the old file or the new one, never half of one.
- `read_journal` verifies every complete line; a last line without its newline
  (a run killed mid-append) is torn: it is left out and reported by offset so
  the writer can cut it before appending again.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl.errors import RunError

from ._checkpoint_key import CheckpointRefused, key_id

_PREFIX = b'{"mac":"'
_MIDDLE = b'","record":'
_MAC_HEX = 64
_BODY_AT = len(_PREFIX) + _MAC_HEX + len(_MIDDLE)


def seal(key: bytes, previous: str, body: bytes) -> tuple[str, bytes]:
    """The MAC of `body` chained after `previous`, and the whole line to write."""
    mac = hmac.new(key, previous.encode("ascii") + b"\n" + body, hashlib.sha256).hexdigest()
    return mac, _PREFIX + mac.encode("ascii") + _MIDDLE + body + b"}\n"


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


def _bad_mac(path: Path, key: bytes, number: int, body: bytes) -> CheckpointRefused:
    if number == 0:
        try:
            sealed_with = json.loads(body).get("key_id")
        except (ValueError, AttributeError, RecursionError):
            sealed_with = None
        if isinstance(sealed_with, str) and sealed_with != key_id(key):
            return CheckpointRefused(
                codes.CHECKPOINT_OTHER_KEY,
                f"{str(path)!r} was sealed with another key (key id {sealed_with}; "
                f"this user's key id is {key_id(key)})",
                hint="resume as the user who made it, with the same config folder",
            )
    return CheckpointRefused(
        codes.CHECKPOINT_TAMPERED,
        f"{_describe(number, body)} of {str(path)!r} does not match its MAC: it was edited, "
        "or records were removed or reordered",
        hint="a checkpoint is only read as written; start the run again without --resume",
    )


def _corrupt(path: Path, what: str) -> CheckpointRefused:
    return CheckpointRefused(
        codes.CHECKPOINT_CORRUPT,
        f"checkpoint {str(path)!r} is torn or corrupt: {what}; it is not read",
        hint="start the run again without --resume",
    )


def read_journal(path: Path, key: bytes) -> JournalRead:
    """Every complete record of `path`, verified; `CheckpointRefused` (CD950, 951, 953) else.

    Raises `FileNotFoundError` when there is no file (the caller says what that means).
    """
    raw = path.read_bytes()
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
            raise _corrupt(path, f"record {number} is not a sealed record")
        mac, body = line[len(_PREFIX) : len(_PREFIX) + _MAC_HEX], line[_BODY_AT:-2]
        expected, _ = seal(key, previous, body)
        if not hmac.compare_digest(expected.encode("ascii"), mac):
            raise _bad_mac(path, key, number, body)
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            data = None
        if not isinstance(data, dict):
            raise _corrupt(path, f"record {number} is not a JSON object")
        records.append(Record(number, data, expected))
        previous, start = expected, stop
    if not records:
        raise _corrupt(path, "it holds no complete record")
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

    A failure (full disk, folder gone) raises `RunError` and leaves the previous
    `folder/name` as it was; the temp file is removed.
    """
    temp = folder / f".{name}.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with temp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, folder / name)
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temp.unlink(missing_ok=True)
        raise _write_error(folder / name, exc) from None


def open_for_append(path: Path, end: int) -> int:
    """A descriptor appending to `path`, cut first at `end` (drops a torn last line)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        raise _write_error(path, exc) from None
    try:
        if os.fstat(fd).st_size != end:
            os.ftruncate(fd, end)
            os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        raise _write_error(path, exc) from None
    return fd


def append_line(fd: int, path: Path, line: bytes) -> None:
    """Append `line` (all of it) and `fdatasync`; `RunError` on any failure."""
    try:
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fdatasync(fd)
    except OSError as exc:
        raise _write_error(path, exc) from None
