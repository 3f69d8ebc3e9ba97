"""A command's `-o PATH` file: checked before the command's work, written at its end.

The rule below (`output_stream`) says where the outputs of the command line go,
`-o` and a single run's `--trace` and `--report` alike. A batch's outputs (`run
--cases ... --out/--report/--record`) do not follow it: they are files, opened
and checked by `batch._outputs` (a device or a stream is refused there).

`diff`, `eval` and `graph` compute their whole output, then write it. `command_output`
checks the path before that work starts, so that a path that cannot be
written is said at once rather than after an evaluation's model calls:

- a file the command reads (`A`, `B`, the evaluation file, its dataset, the
  baseline) is refused, naming it: the output would overwrite it;
- `/dev/stdout` (and its other names, `/dev/fd/1`, `/proc/self/fd/1`) is the
  command's standard output, whatever it is (`-o /dev/stdout > FILE`: a link to a
  file, which no other output may be written through); `/dev/stderr` (`/dev/fd/2`,
  `/proc/self/fd/2`) is its standard error, even when both are one terminal;
- a path that is the very regular file or pipe one of the command's own streams
  is open on (the same device and inode as its descriptor: `-o FILE > FILE`) is
  written through that stream;
- a character device or a pipe (`-o /dev/null`, a terminal), links to one
  included, is written as it is, as standard output would be;
- any other file is opened by the one output opener (`_files.open_output`):
  never through a link, never a file with other hard links; a missing folder is
  refused. An existing regular file is replaced when `recognise` accepts its
  first line (by default any: these outputs are reports, and the command names
  the file).

Nothing is changed until the output is written, and then the file is replaced
whole or not at all (a temporary file beside it, fsynced, renamed over it:
`_files.replace_output`): a write that fails late (a full disk) names the file
and leaves what it held. A file the opener made and the command never wrote (it
failed, or found nothing to write) is removed again.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from converge_dsl import codes
from converge_dsl._files import (
    OUTPUT_ERRORS,
    CheckedStream,
    WholeOutput,
    same_file,
    whole_output,
)
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO


class CommandOutput:
    """Where a command's output goes: the `-o` file, or standard output (`path` None)."""

    def __init__(self, stdout: IO[str], whole: WholeOutput | None = None) -> None:
        self._stdout = stdout
        self._whole = whole
        self.path = None if whole is None else whole.path

    def write(self, text: str) -> None:
        """Write the command's whole output (once), replacing what the file held: whole
        or not at all (`_files.whole_output`)."""
        if self._whole is None:
            self._stdout.write(text)
            return
        self._whole.write(text)


@contextlib.contextmanager
def command_output(
    io: CommandIO,
    path: str | Path | None,
    option: str,
    what: str,
    reads: Sequence[tuple[str | Path, str]],
    *,
    recognise: Callable[[bytes], bool] = lambda first: True,
) -> Iterator[CommandOutput]:
    """The output of a command (see the module docstring); `reads` are (file, what it is);
    `recognise` accepts the first line of an existing file it may replace.

    `UsageError` for an output that is one of `reads` or that the opener refuses.
    """
    stdout = io.stdout
    if path is None or str(path) == "":
        yield CommandOutput(stdout)
        return
    target = Path(path)
    found = output_stream(io, target, option, reads)
    if found is not None:
        stream, opened = found
        try:
            yield CommandOutput(stream)
        finally:
            if opened is not None:
                _close(opened)
        return
    with whole_output(target, option, what, recognise=recognise) as whole:
        yield CommandOutput(stdout, whole)


def output_stream(
    io: CommandIO, path: Path, option: str, reads: Sequence[tuple[str | Path, str]] = ()
) -> tuple[IO[str], IO[str] | None] | None:
    """The stream the output `path` is written through, and the file opened here for it
    (a device or a pipe, which the caller closes with `_close`; else None); None for a
    file, which the output opener opens. The rule of the module docstring, for every
    output of the command line (`-o`, `run --trace`, `run --report`). A device's every
    write is checked and names it (`/dev/full`). `UsageError` for a path that is one of
    `reads`."""
    if str(path) in _STANDARD_OUTPUT:
        _refuse_stream_read(io.stdout, str(path), option, reads)
        return io.stdout, None
    for read, name in reads:
        if same_file(path, Path(read)):
            raise _would_overwrite(option, str(path), name)
    if str(path) in _STANDARD_ERROR:
        return io.stderr, None
    own = _own_stream(path, (io.stdout, io.stderr))
    if own is not None:
        return own, None
    if not _is_stream(path):
        return None
    try:
        device = open(path, "w", encoding="utf-8", errors=OUTPUT_ERRORS)  # noqa: SIM115
    except OSError as exc:
        raise UsageError(
            f"cannot write {option} {str(path)!r}: {exc.strerror}", code=codes.OUTPUT_REFUSED
        ) from None
    checked = CheckedStream(device, f"{option} {str(path)!r}")
    return cast("IO[str]", checked), device


def _close(device: IO[str]) -> None:
    """Close a device opened for an output: each write was flushed and checked."""
    with contextlib.suppress(OSError):
        device.close()


def sink_stream(
    io: CommandIO, path: Path | None, option: str, closing: contextlib.ExitStack
) -> IO[str] | None:
    """The stream a run's output `path` (`--trace`, `--report`) is written through
    (`output_stream`; one opened here is closed by `closing`), else None (a file, which
    its sink opens). Standard output is refused, whatever the format: it holds the run's
    result (the run-result document, or the human result)."""
    found = None if path is None else output_stream(io, path, option)
    if found is None:
        return None
    stream, opened = found
    if opened is not None:
        closing.callback(_close, opened)
    if stream is io.stdout:
        raise UsageError(
            f"{option} {str(path)!r} is standard output, which holds the run's result",
            hint=f"give {option} a file, or /dev/stderr",
            code=codes.OUTPUT_REFUSED,
        )
    return stream


def shown(path: Path) -> str:
    """`path` as a line naming it shows it: as a diagnostic's location does
    (`diagnostics.one_line`), so a name cannot split the line or drive the terminal."""
    from converge_dsl.diagnostics import one_line

    return one_line(str(path))


# The names of standard output and standard error an output may give.
_STANDARD_OUTPUT = frozenset({"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})
_STANDARD_ERROR = frozenset({"/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"})


def _would_overwrite(option: str, target: str, name: str) -> UsageError:
    return UsageError(
        f"{option} {target!r} is {name}; it would be overwritten",
        hint=f"give {option} a file of its own",
        code=codes.OUTPUT_REFUSED,
    )


def _refuse_stream_read(
    stream: IO[str], given: str, option: str, reads: Sequence[tuple[str | Path, str]]
) -> None:
    """`UsageError` when `stream`'s open descriptor is one of the files `reads` names."""
    own = _opened_file(stream)
    if own is None:
        return
    for read, name in reads:
        with contextlib.suppress(OSError, ValueError):
            named = os.stat(read)
            if own == (named.st_dev, named.st_ino):
                raise _would_overwrite(option, given, name)


def _own_stream(path: Path, streams: Sequence[IO[str]]) -> IO[str] | None:
    """The first of `streams` whose open descriptor is the file or pipe `path` names
    (links followed: `/proc/PID/fd/2` is the file standard error was redirected to), else
    None. A character device (a terminal, `/dev/null`) is no stream's own: both streams
    may be open on it, and it is written as it is."""
    try:
        named = path.stat()
    except (OSError, ValueError):
        return None
    if stat.S_ISCHR(named.st_mode):
        return None
    return next((s for s in streams if _opened_file(s) == (named.st_dev, named.st_ino)), None)


def _opened_file(stream: IO[str]) -> tuple[int, int] | None:
    """(device, inode) of the file `stream`'s descriptor is open on; None for a stream
    without one (a StringIO, a closed stream)."""
    try:
        own = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return None
    return own.st_dev, own.st_ino


def _is_stream(path: Path) -> bool:
    """`path` is, or links to, a character device or a pipe."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)
