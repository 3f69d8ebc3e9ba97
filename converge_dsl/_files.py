"""Files a pipeline names, and writes that are checked (docs/architecture.md §12).

Referenced files. A path a pipeline names (`models.X.script`, `models.X.cassette`,
`models.X.record`) is resolved against the pipeline's folder, after `..`,
absolute paths and symbolic links, and must lie inside an allowed root: the
pipeline's folder, a folder given with `--allow-root DIR` (on `validate` and
`run`), or one listed in the environment variable `CONVERGE_DSL_ALLOW_ROOTS`
(folders separated by `os.pathsep`). `referenced_path` is the one check, used
by `validate` (a located diagnostic) and by `run` (the same refusal, before
the file is read). A file that is read must also be a regular file with one
link: a FIFO would hang the read, a device never ends, and a hard link may
name a file outside every root.

Outputs. `open_output` is the one way an output file (`--trace`, `--record`,
`models.X.record`) is opened: with `O_NOFOLLOW`, so a symbolic link is never
written through, and refused when the path exists and is not a regular file
with one link, or holds something other than what we write there (its first
line must be ours, as `recognise` says; an empty file is fine). A new file
may be created wherever the user names it: nothing foreign is overwritten.

Checked writes. `write_all` writes all of a text to a stream or raises
`OutputError` (exit 1): a stream that takes only part of it (Linux caps one
`write()` at 2,147,479,552 bytes) is asked again for the rest, and one that
takes nothing, or fails (a full disk, a closed pipe), is an error, never a
silently shorter output. `CheckedStream` wraps a text stream so that every
write and flush goes through it.

Replacements and locks. `replace_file` is the one atomic replacement: the
temporary file is made in the target's folder with `O_CREAT | O_EXCL |
O_NOFOLLOW` under a name no one can plant in advance (a planted link or hard
link at a fixed temporary name is never opened), its mode set with `fchmod`
on the descriptor (never a `chmod` that would follow a link), written,
fsynced and renamed over the target (`replace_output`: an output `open_output`
checked, written whole at the command's end, or in place when its folder refuses
the temporary file). `open_lock` opens a lock file the same
way `open_output` opens an output: never through a link, never a FIFO, a
device or a file with several hard links. `create_new` creates a file that
must not exist (`init`, a new key). `jsonl_lines` splits JSON Lines on `\n`
only: U+2028, U+2029, U+0085 and a lone CR are characters of a record.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from converge_dsl import codes
from converge_dsl.errors import ConvergeError, UsageError

ALLOW_ROOTS_ENV = "CONVERGE_DSL_ALLOW_ROOTS"
ALLOW_HINT = (
    "keep the files a pipeline names inside its folder, or allow another folder with "
    f"--allow-root DIR (or {ALLOW_ROOTS_ENV})"
)


class ReferenceRefused(ConvergeError):
    """A path a pipeline names resolves outside every allowed root, or is not a plain file.

    `code` is `REFERENCE_OUTSIDE_ROOTS` or `REFERENCE_NOT_REGULAR`. Exit code 2,
    like any invalid pipeline.
    """

    exit_code = 2

    code: str

    def __init__(self, code: str, message: str, *, hint: str) -> None:
        super().__init__(message, hint=hint, code=code)


class OutputError(ConvergeError):
    """A write to standard output or to an output file failed or was cut short (exit 1)."""

    code = codes.ENVIRONMENT_FAILED


def user_roots(
    given: Iterable[str | Path] = (), env: Mapping[str, str] | None = None
) -> tuple[Path, ...]:
    """The roots the user allows: the `given` folders, then those of `CONVERGE_DSL_ALLOW_ROOTS`.

    `env` defaults to the process environment. Each root is resolved (links followed).
    """
    environment = os.environ if env is None else env
    listed = [entry for entry in environment.get(ALLOW_ROOTS_ENV, "").split(os.pathsep) if entry]
    return tuple(Path(os.path.realpath(Path(root).expanduser())) for root in (*given, *listed))


def display_name(path: Path) -> str:
    """The path as the user reads it: relative to the working folder when inside it."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:  # outside the working folder: as given
        return str(path)


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def same_file(a: Path, b: Path) -> bool:
    """True when `a` and `b` name one file (the same resolved path, or a hard link)."""
    with contextlib.suppress(OSError):
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def special_kind(mode: int) -> str | None:
    """What a file of `mode` is when it is neither a regular file nor a folder, else None."""
    return next((name for test, name in _KINDS if test(mode)), None)


def referenced_path(
    raw: str,
    base_dir: Path,
    roots: Sequence[Path] = (),
    *,
    field: str,
    read: bool = True,
) -> Path:
    """The resolved path of `raw` (named by the pipeline field `field`), or `ReferenceRefused`.

    `raw` is relative to `base_dir` (the pipeline's folder), which is always an
    allowed root; `roots` are the others (`user_roots`). The resolved path must
    lie inside one of them. With `read`, an existing path must also be a
    regular file (or a folder, for the caller to report) with a single link.
    A missing file is returned as it is, for the caller to report.
    """
    if "\0" in raw:
        raise ReferenceRefused(
            codes.REFERENCE_NOT_REGULAR,
            f"{field} {raw!r} holds a NUL character, which no file name can; it is not read",
            hint="name a regular file inside the pipeline's folder",
        )
    given = base_dir / raw
    resolved = Path(os.path.realpath(given))
    allowed = (Path(os.path.realpath(base_dir)), *roots)
    if not _inside(resolved, allowed):
        linked = resolved != Path(os.path.abspath(given))
        shown = f" (through a link, to {str(resolved)!r})" if linked else ""
        raise ReferenceRefused(
            codes.REFERENCE_OUTSIDE_ROOTS,
            f"{field} {raw!r} is outside the pipeline's folder{shown}; it is not read",
            hint=ALLOW_HINT,
        )
    if not read:
        return resolved
    try:
        info = os.stat(resolved)
    except FileNotFoundError:
        return resolved
    except OSError as exc:
        raise ReferenceRefused(
            codes.REFERENCE_NOT_REGULAR,
            f"{field} {raw!r} cannot be used: {exc.strerror or exc}",
            hint="name a regular file",
        ) from None
    kind = special_kind(info.st_mode)
    if kind is not None:
        raise ReferenceRefused(
            codes.REFERENCE_NOT_REGULAR,
            f"{field} {raw!r} is {kind}, not a regular file; it is not read",
            hint="name a regular file inside the pipeline's folder",
        )
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        raise ReferenceRefused(
            codes.REFERENCE_NOT_REGULAR,
            f"{field} {raw!r} has {info.st_nlink} hard links (it may be a file outside the "
            "pipeline's folder); it is not read",
            hint="copy the file into the pipeline's folder instead of linking it",
        )
    return resolved


# How much of an existing output's first line is read to recognise it.
FIRST_LINE_BYTES = 8 << 20


# How an output file is encoded: UTF-8, a lone surrogate (a file name's undecodable byte,
# which Python reads as one) as its escape `\udcff`, which inside a JSON string is that
# character's own JSON escape (a trace, a cassette, a graph's JSON stay JSON), and in text
# is visible, as standard error shows it; strict UTF-8 refused the whole output.
OUTPUT_ERRORS = "backslashreplace"


def open_output(
    path: Path, option: str, what: str, *, recognise: Callable[[bytes], bool], append: bool
) -> IO[str]:
    """Open `path` to write text (truncated, or with `append` appended to); else `UsageError`.

    Refused, naming `option` and `what`: a symbolic link, a folder, a FIFO or
    device, a file with several hard links, and a non-empty file whose first
    line `recognise` does not accept (a file we did not write). The checks are
    made on the opened descriptor, so the path cannot change in between.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags | (os.O_APPEND if append else 0), 0o666)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ELOOP:
            reason = "it is a symbolic link; outputs are never written through links"
        raise _refused(path, option, what, reason) from None
    try:
        problem = _not_ours(fd, recognise, what)
        if problem is not None:
            raise _refused(path, option, what, problem)
        if not append:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        return open(fd, "a" if append else "w", encoding="utf-8", errors=OUTPUT_ERRORS)
    except BaseException:
        os.close(fd)
        raise


def open_ours(
    path: Path, option: str, what: str, *, recognise: Callable[[bytes], bool]
) -> int | None:
    """A read-write descriptor on the existing output `path`, checked; None when missing.

    The checks of `open_output` (no link followed, a regular file with one
    link whose first line `recognise` accepts), made before the caller reads
    or changes a byte of it; a refusal is a `UsageError` naming `option`.
    """
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ELOOP:
            reason = "it is a symbolic link; outputs are never written through links"
        raise _refused(path, option, what, reason) from None
    problem = _not_ours(fd, recognise, what)
    if problem is None and os.fstat(fd).st_size and not recognise(os.pread(fd, 64, 0)):
        problem = f"its first line is not one of a {what} written by converge-dsl"
    if problem is not None:
        os.close(fd)
        raise _refused(path, option, what, problem)
    os.set_blocking(fd, True)
    return fd


def _not_ours(fd: int, recognise: Callable[[bytes], bool], what: str) -> str | None:
    """Why the opened output `fd` may not be written, or None."""
    info = os.fstat(fd)
    kind = special_kind(info.st_mode)
    if kind is not None:
        return f"it is {kind}, not a regular file"
    if info.st_nlink > 1:
        return f"it has {info.st_nlink} hard links; writing would change the other names too"
    if info.st_size == 0:
        return None
    first = os.pread(fd, FIRST_LINE_BYTES, 0).split(b"\n", 1)[0]
    if not first.strip() or recognise(first):
        return None
    return f"it exists and is not a {what} written by converge-dsl; it is not overwritten"


def _refused(path: Path, option: str, what: str, reason: str) -> UsageError:
    return UsageError(
        f"cannot write {what} {str(path)!r} ({option}): {reason}",
        hint=f"give {option} a new file, or one it wrote before, in a folder you can write to",
        code=codes.OUTPUT_REFUSED,
    )


def write_all(stream: IO[str] | Any, text: str, name: str) -> None:
    """Write all of `text` to `stream` (`name` says which in errors), or raise `OutputError`.

    A stream that reports taking fewer characters than given is asked again
    for the rest; one that takes none, or raises `OSError` or `ValueError` (a
    closed file), is an `OutputError` naming `name` and how much was written.
    """
    done = 0
    while done < len(text):
        rest = text[done:] if done else text
        try:
            taken = stream.write(rest)
        except (OSError, ValueError) as exc:
            raise _failure(name, exc, done) from None
        if taken is None:  # a stream that does not count: it took everything or raised
            return
        if taken <= 0:
            raise _failure(name, OSError(errno.EIO, "the stream took nothing"), done)
        done += min(taken, len(rest))


def flush_checked(stream: IO[str] | Any, name: str) -> None:
    """Flush `stream`; a failure is an `OutputError` naming `name`."""
    flush = getattr(stream, "flush", None)
    if flush is None:
        return
    try:
        flush()
    except (OSError, ValueError) as exc:
        raise _failure(name, exc, None) from None


def _failure(name: str, exc: BaseException, done: int | None) -> OutputError:
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
        reason = "the reader closed the pipe"
    kept = "" if done is None else f" after {done} character(s)"
    return OutputError(
        f"cannot write {name}: {reason}{kept}; the output is incomplete",
        hint="free space, keep the reader open, or write to another file",
    )


class CheckedStream:
    """A text stream whose every `write` and `flush` is checked (`write_all`, `flush_checked`).

    Each write is flushed at once, so a failure is seen where it happens, not
    when the process ends. `wrote` says whether any text was given to it (a
    failed command's JSON error object goes only where nothing went before).
    Other attributes (`isatty`, `fileno`, `encoding`) are the wrapped stream's.
    """

    __slots__ = ("name", "stream", "wrote")

    def __init__(self, stream: IO[str] | Any, name: str) -> None:
        self.stream = stream
        self.name = name
        self.wrote = False

    def write(self, text: str) -> int:
        self.wrote = self.wrote or bool(text)
        write_all(self.stream, text, self.name)
        flush_checked(self.stream, self.name)
        return len(text)

    def flush(self) -> None:
        flush_checked(self.stream, self.name)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.stream, attribute)


def jsonl_lines(text: str) -> list[str]:
    """The lines of JSON Lines `text`, split on `\n` only (a `\r` before it dropped).

    `str.splitlines` also splits on U+2028, U+2029, U+0085, form feeds and
    lone CRs, which JSON allows inside a string: a record holding one would
    become two.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# Attempts at a fresh temporary name before `replace_file` gives up (each is random).
_TEMP_ATTEMPTS = 16
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def create_new(path: Path, mode: int = 0o666) -> int:
    """A descriptor open for writing on `path`, made now (`O_EXCL | O_NOFOLLOW`).

    `FileExistsError` when anything is there already, a dangling link included.
    """
    return os.open(path, _NEW_FLAGS, mode)


def replace_file(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    owner: tuple[int, int] | None = None,
    sync_folder: bool = False,
) -> None:
    """Replace `path` by a file holding `data`, atomically; raises `OSError`.

    The temporary file is `.NAME.<pid>.<random>.tmp` in `path`'s folder,
    created with `O_EXCL | O_NOFOLLOW` (so nothing planted is written
    through), given `owner` (uid, gid) with `fchown` when it is not already
    its (`EPERM` when it cannot be) and `mode` with `fchmod` (default: 0666
    less the umask), written whole, fsynced and renamed over `path` (a link
    at `path` is replaced, not followed). With `sync_folder` the folder is
    fsynced too. On any failure the temporary file is removed and `path` is
    as it was.
    """
    fd, temp = _fresh(path)
    try:
        try:
            if owner is not None:
                made = os.fstat(fd)
                if (made.st_uid, made.st_gid) != owner:
                    os.fchown(fd, *owner)
            if mode is not None:
                os.fchmod(fd, mode)
            _write_synced(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if sync_folder:
        folder = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def replace_output(stream: IO[str], path: Path, text: str, name: str) -> None:
    """Replace the output `path`, which `stream` (from `open_output`) is open on, by
    `text`, whole or not at all (`replace_file`, keeping the file's mode, owner and group).

    When the folder refuses the temporary file or its rename (a read-only or a
    sticky folder, a name too long for the temporary's, a bind-mounted file), or
    the temporary file cannot be given the file's owner and group, the file,
    which was checked and opened, is written in place through `stream`'s
    descriptor: truncated, written, fsynced. A failure at any step (a full disk at a late
    write, at fsync or close, the rename) is an `OutputError` naming `name`;
    `path` is as it was, unless the failure cut short a write in place.
    """
    data = text.encode("utf-8", OUTPUT_ERRORS)
    fd = stream.fileno()
    try:
        try:
            info = os.fstat(fd)
            owner = (info.st_uid, info.st_gid)
            replace_file(path, data, mode=info.st_mode & 0o7777, owner=owner)
            return
        except OSError as exc:
            if exc.errno not in _FOLDER_REFUSES:
                raise
    except OSError as exc:
        raise _output_failure(name, exc, "nothing was written, the file is as it was") from None
    try:
        os.ftruncate(fd, 0)
        _write_synced(fd, data)  # the descriptor appends: from 0, once truncated
    except OSError as exc:
        raise _output_failure(name, exc, "the file was written in place and is cut short") from None


class WholeOutput:
    """An output file `whole_output` opened, which `write` replaces whole, once."""

    __slots__ = ("_stream", "name", "path", "written")

    def __init__(self, stream: IO[str], path: Path, name: str) -> None:
        self._stream = stream
        self.path = path
        self.name = name
        self.written = False

    def write(self, text: str) -> None:
        """Replace the file by `text`, whole or not at all (`replace_output`)."""
        replace_output(self._stream, self.path, text, self.name)
        self.written = True


@contextlib.contextmanager
def whole_output(
    path: Path, option: str, what: str, *, recognise: Callable[[bytes], bool]
) -> Iterator[WholeOutput]:
    """The output `path`, opened and checked by `open_output` (`UsageError`), to be
    replaced whole by its `write`. A file the opener made and that was never written
    (the work failed, was interrupted by a Ctrl-C, or found nothing to write) is
    removed again: the one way a whole output (`-o`, a report page) is written."""
    existed = os.path.lexists(path)
    stream = open_output(path, option, what, recognise=recognise, append=True)
    output = WholeOutput(stream, path, f"{what} {str(path)!r}")
    try:
        with stream:
            yield output
    finally:
        if not existed and not output.written:
            with contextlib.suppress(OSError):
                path.unlink()


def _write_synced(fd: int, data: bytes) -> None:
    """Write all of `data` to the descriptor `fd`, then fsync it; raises `OSError`."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


# The folder of an output refuses a file made or renamed in it (EBUSY: the output is a mount
# point, a file bind-mounted into a container): the output is written in place.
_FOLDER_REFUSES = frozenset(
    {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENAMETOOLONG, errno.EBUSY}
)


def _output_failure(name: str, exc: OSError, state: str) -> OutputError:
    """The `OutputError` of a failed output write, its hint chosen by what failed."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        hint = "free space, or write to another file"
    elif exc.errno in _FOLDER_REFUSES:
        hint = "write to a file in a folder you can write to"
    else:
        hint = "check the disk, or write to another file"
    return OutputError(f"cannot write {name}: {reason}; {state}", hint=hint)


def _fresh(path: Path) -> tuple[int, Path]:
    """A new temporary file beside `path`: its descriptor and its path (`path`'s name cut
    so that the temporary's fits where `path`'s does)."""
    import secrets  # here: hmac, hashlib and random cost `validate`, which writes nothing

    base = os.fsdecode(os.fsencode(path.name)[:_TEMP_BASE_BYTES])
    for _ in range(_TEMP_ATTEMPTS):
        temp = path.with_name(f".{base}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
        try:
            return create_new(temp, 0o666), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no fresh temporary name", str(path.parent))


# The bytes of a target's name kept in its temporary's (NAME_MAX is 255; the rest of the
# temporary's name, a pid and a random part, takes up to 33).
_TEMP_BASE_BYTES = 200


def open_lock(path: Path) -> int:
    """A descriptor on the lock file `path` (made when missing), or `OSError`.

    Like an output (`open_output`): a symbolic link is never followed
    (`ELOOP`), and a FIFO, a device or a file with several hard links is
    refused (`EPERM`, its reason in `strerror`). Nothing is written to it.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            reason = "it is a symbolic link; locks are never taken through links"
            raise OSError(errno.ELOOP, reason) from None
        raise
    info = os.fstat(fd)
    kind = special_kind(info.st_mode)
    problem = f"it is {kind}, not a regular file" if kind else None
    if problem is None and info.st_nlink > 1:
        problem = f"it has {info.st_nlink} hard links"
    if problem is not None:
        os.close(fd)
        raise OSError(errno.EPERM, problem)
    return fd
