"""The one reader of files converge-dsl did not write (docs/architecture.md §12).

The mirror of the output opener (`converge_dsl._files.open_output`). Every
file the tool reads that someone else may have put there (a pipeline, a model
script, a cassette, a checkpoint journal or decisions file, a compile-cache
entry, a trace, a cases file, a lock file, a pack archive, an inputs file, a
test file) is opened by `open_regular`: with `O_NONBLOCK` and `O_NOCTTY`, so
that opening a FIFO or a terminal returns at once; then `fstat` on the opened
descriptor must say "regular file" (a symbolic link is followed, and what it
names is what is checked); only then is blocking restored for the read. A
FIFO, a character or block device (`/dev/zero`, `/dev/urandom`, a terminal), a
socket, or a link to one of them is refused with `ReadRefused` (code CD930,
exit 3) naming the file and what it is; nothing is read from it, so nothing
can hang or stream without end. `read_bytes` also stops at a byte cap: a file
over it is refused (CD931) before more than the cap is held in memory.

A missing file, a folder or a permission problem stays the `OSError` it is
(`FileNotFoundError`, `IsADirectoryError`, ...), for each caller to say in its
own words as before.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from converge_dsl import codes
from converge_dsl._files import special_kind
from converge_dsl.errors import UsageError

# The default cap of `read_bytes`: larger than any file the tool reads whole.
DEFAULT_CAP = 256 << 20
_CHUNK = 1 << 20


class ReadRefused(UsageError):
    """A file to read is not a regular file (CD930) or is over its cap (CD931); exit 3.

    `code` is the stable code, `reason` why, `path` the file as given, `what` what it
    was read as.
    """

    code: str

    def __init__(self, code: str, path: Path, what: str, reason: str, *, hint: str) -> None:
        super().__init__(f"cannot read {what} {str(path)!r}: {reason}", hint=hint, code=code)
        self.reason = reason
        self.path = path
        self.what = what


def read_failure(exc: OSError, path: Path, what: str, *, hint: str | None = None) -> UsageError:
    """The refusal of reading `what` at `path` that failed with `exc`: CD334 when no such
    file is there (or a folder is), else CD335 with the system's reason."""
    if isinstance(exc, FileNotFoundError | NotADirectoryError | IsADirectoryError):
        reason = "it is a folder" if isinstance(exc, IsADirectoryError) else "no such file"
        return UsageError(
            f"cannot read {what} {str(path)!r}: {reason}",
            hint=hint or f"check the path of the {what}",
            code=codes.PATH_NOT_FOUND,
        )
    return UsageError(
        f"cannot read {what} {str(path)!r}: {exc.strerror or exc}",
        hint=hint,
        code=codes.FILE_UNREADABLE,
    )


def _kind(mode: int) -> str:
    return special_kind(mode) or ("a folder" if stat.S_ISDIR(mode) else "not a regular file")


def _not_regular(path: Path, what: str, kind: str) -> ReadRefused:
    through = " (through a symbolic link)" if os.path.islink(path) else ""
    return ReadRefused(
        codes.READ_NOT_REGULAR,
        path,
        what,
        f"it is {kind}{through}, not a regular file; nothing was read from it",
        hint=f"give a regular file as the {what}",
    )


def open_regular(path: Path, what: str) -> BinaryIO:
    """`path` opened for reading in binary, once it is known to be a regular file.

    `ReadRefused` (CD930) for a FIFO, device, socket or a link to one; other
    failures are the `OSError` of `open` (see the module docstring).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a socket cannot be opened
            try:
                mode = os.stat(path).st_mode
            except OSError:
                raise exc from None
            raise _not_regular(path, what, _kind(mode)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise _not_regular(path, what, _kind(mode))
        os.set_blocking(fd, True)
        return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, what: str, *, cap: int = DEFAULT_CAP) -> bytes:
    """The whole content of the regular file `path`, refused (CD931) past `cap` bytes.

    See `open_regular` for what is refused before anything is read.
    """
    with open_regular(path, what) as stream:
        if os.fstat(stream.fileno()).st_size > cap:  # refused before a byte is read
            raise _too_large(path, what, cap)
        chunks: list[bytes] = []
        held = 0
        while chunk := stream.read(min(_CHUNK, cap + 1 - held)):
            chunks.append(chunk)
            held += len(chunk)
            if held > cap:  # it grew while it was read
                raise _too_large(path, what, cap)
        return b"".join(chunks)


def _too_large(path: Path, what: str, cap: int) -> ReadRefused:
    return ReadRefused(
        codes.READ_TOO_LARGE,
        path,
        what,
        f"it is over {cap} bytes, the most read for a {what}",
        hint=f"give a smaller {what}",
    )


def read_text(path: Path, what: str, *, cap: int = DEFAULT_CAP) -> str:
    """`read_bytes` decoded as UTF-8 (a `UnicodeDecodeError` is the caller's to word)."""
    return read_bytes(path, what, cap=cap).decode("utf-8")
