"""Small file helpers of the pack machinery: atomic writes, JSON from untrusted bytes.

`write_atomic(path, data)` writes a uniquely named temporary file beside
`path`, flushes it to disk (fsync) and renames it into place, so a reader sees
the old content or the new, never half of it; two writers never share a
temporary name and a leftover file or folder with a `.tmp` name is no
obstacle. `parse_json(data, where)` reads JSON that a repository, a cache or a
lock file handed us: any failure (not UTF-8, not JSON, nested too deep) is a
`PackError` naming `where`, never a traceback.

`read_regular(path, cap=..., deadline_s=..., where=...)` is how a folder
repository reads: the final path component must be a regular file (checked
with `os.lstat`, then opened with `O_NOFOLLOW | O_NONBLOCK` and checked again
with `fstat`, so a link to `/dev/zero`, a FIFO or a device is refused without
blocking), and the read stops at `cap` bytes or `deadline_s` seconds.

`PackRefused` is the `PackError` every pack module raises: it carries the
stable code (CD5xx, or from CD320 on for the refusals of the pack commands)
that `lock`, `pack ...` and the pack checks of `validate` and `run` show with
it; tests/packs/test_codes.py holds each raise to having one. `Notice` is
the text of a warning with such a code (a yanked pin, CD572).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from converge_dsl.codes import (
    PACK_FILE_NOT_WRITTEN,
    REPOSITORY_NOT_REGULAR,
    REPOSITORY_TOO_LARGE,
    REPOSITORY_TOO_SLOW,
    REPOSITORY_UNREADABLE,
)
from converge_dsl.errors import PackError


class PackRefused(PackError):
    """A pack error with its stable code (`converge_dsl.codes`).

    `packs` names the packs it is about; `where` (`FILE:LINE:COLUMN`, set by whoever
    knows the file) is where the pipeline asks for the first of them.
    """

    code: str

    def __init__(
        self, code: str, message: str, *, hint: str | None = None, packs: tuple[str, ...] = ()
    ) -> None:
        super().__init__(message, hint=hint, code=code)
        self.packs = packs


class Notice(str):
    """A warning's text with a stable code and a hint: `warn` callbacks print it as
    `warning[CODE]: text` (a plain `str` where the code is not known)."""

    code: str
    hint: str | None

    def __new__(cls, code: str, message: str, *, hint: str | None = None) -> Notice:
        notice = super().__new__(cls, message)
        notice.code = code
        notice.hint = hint
        return notice


SHA256 = re.compile(r"[0-9a-f]{64}\Z")  # an archive digest as indexes and locks write it


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically (`converge_dsl._files.replace_file`).

    Raises `PackRefused` (CD322) naming the file when the folder cannot be written.
    """
    from converge_dsl._files import replace_file

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data, mode=mode)
    except OSError as exc:
        raise PackRefused(
            PACK_FILE_NOT_WRITTEN, f"cannot write {path.name}: {exc.strerror or exc}"
        ) from None


def parse_json(data: bytes | str, where: str, code: str = REPOSITORY_UNREADABLE) -> Any:
    """The JSON value in `data`; raises `PackRefused` with `code` ("WHERE: ...") when it
    is not usable (a lock file's reader gives its own code)."""
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackRefused(code, f"{where}: not JSON ({exc})") from None
    except RecursionError:
        raise PackRefused(code, f"{where}: JSON nested too deeply") from None


_READ_CHUNK = 64 * 1024
_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_BINARY", 0)
)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _not_regular(where: str, mode: int) -> PackRefused:
    return PackRefused(
        REPOSITORY_NOT_REGULAR,
        f"{where} is {_kind(mode)}; a folder repository holds regular files only",
        hint="replace it with the file itself (pack publish writes a valid repository)",
    )


def read_regular(
    path: Path,
    *,
    cap: int,
    deadline_s: float,
    where: str,
    monotonic: Callable[[], float] = time.monotonic,
) -> bytes | None:
    """The bytes of the regular file `path`, or None when it does not exist.

    Refuses (`PackRefused`, naming `where`) a link, folder, FIFO or device
    (CD561), a file over `cap` bytes (CD562) and a read that takes longer than
    `deadline_s` (CD563); other I/O failures are CD324.
    """
    try:
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(where, mode)
        descriptor = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # replaced by a link after the lstat
            raise _not_regular(where, stat.S_IFLNK) from None
        raise PackRefused(
            REPOSITORY_UNREADABLE, f"cannot read {where}: {exc.strerror or exc}"
        ) from None
    give_up = monotonic() + deadline_s
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(where, status.st_mode)
        chunks: list[bytes] = []
        size = status.st_size
        if size > cap:
            raise _over_cap(where, cap)
        size = 0
        while chunk := os.read(descriptor, _READ_CHUNK):
            size += len(chunk)
            if size > cap:
                raise _over_cap(where, cap)
            if monotonic() > give_up:
                raise PackRefused(
                    REPOSITORY_TOO_SLOW,
                    f"{where}: not read within {deadline_s:g} s",
                    hint="the repository folder is too slow (a stalled network share?)",
                )
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise PackRefused(
            REPOSITORY_UNREADABLE, f"cannot read {where}: {exc.strerror or exc}"
        ) from None
    finally:
        os.close(descriptor)


def _over_cap(where: str, cap: int) -> PackRefused:
    return PackRefused(
        REPOSITORY_TOO_LARGE,
        f"{where} is over {cap} bytes, refused",
        hint="an index is a few KB and an archive a few MB; ask the repository owner",
    )
