"""The checkpoint folder: checked before a run, and locked for one run at a time.

One run at a time: a run with `--checkpoint DIR` or `--resume DIR` holds an
exclusive lock (`flock` on `DIR/.lock`) for its whole length; a second run on
the same folder is refused at once with a `UsageError` (exit 3), so two resumes
of one pause cannot both go on with different decisions.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from converge_dsl import codes
from converge_dsl._files import open_lock
from converge_dsl.errors import UsageError

LOCK_FILE = ".lock"


def check_folder(folder: Path, option: str, *, create: bool) -> None:
    """Before a run: `folder` must be a folder (made when `create`); else `UsageError`."""
    if folder.exists() and not folder.is_dir():
        made = " (it is created when missing)" if create else ""
        raise UsageError(
            f"{option} {str(folder)!r} is a file, not a folder",
            hint=f"give {option} a folder path{made}",
            code=codes.OUTPUT_REFUSED if create else codes.PATH_NOT_FOUND,
        )
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"cannot create {option} folder {str(folder)!r}: {exc.strerror or exc}",
                hint=f"give {option} a folder path you can write to",
                code=codes.OUTPUT_REFUSED,
            ) from None
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(
            f"{option} folder {str(folder)!r} is not writable",
            hint=f"give {option} a folder you can write to",
            code=codes.OUTPUT_REFUSED,
        )


@contextlib.contextmanager
def folder_lock(folder: Path | None, option: str) -> Iterator[None]:
    """Hold an exclusive, non-blocking lock on checkpoint `folder` (nothing when `None`).

    Another run holding it is a `UsageError` naming `option`; the lock goes
    with the process (also on a crash), the lock file stays.
    """
    if folder is None:
        yield
        return
    import fcntl

    try:
        fd = open_lock(folder / LOCK_FILE)
    except OSError as exc:
        raise UsageError(
            f"cannot lock {option} folder {str(folder)!r}: {exc.strerror or exc}",
            hint=f"give {option} a folder you can write to",
            code=codes.OUTPUT_REFUSED,
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(
                f"{option} folder {str(folder)!r} is in use by another run",
                hint="wait for that run to finish, then try again",
                code=codes.FOLDER_IN_USE,
            ) from None
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
