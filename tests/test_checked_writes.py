"""Checked writes: a short write is continued, a failed one is exit 1 with a message.

Fakes stand for streams that take part of a write (Linux caps one `write()` at
2,147,479,552 bytes), fill the disk (ENOSPC) or lose their reader (EPIPE); real
processes write to `/dev/full` and to a pipe whose reader is gone.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from converge_dsl._files import CheckedStream, OutputError, write_all
from converge_dsl.cli import run

PIPELINES = Path(__file__).resolve().parent.parent / "pipelines"
LINUX_WRITE_CAP = 0x7FFFF000  # 2,147,479,552: the most one write() takes on Linux


class ShortWrites(io.StringIO):
    """Takes at most `cap` characters per write, as a raw stream past the kernel's cap does."""

    def __init__(self, cap: int) -> None:
        super().__init__()
        self.cap = cap
        self.calls = 0

    def write(self, text: str) -> int:
        self.calls += 1
        return super().write(text[: self.cap])


class Failing(io.StringIO):
    """Fails every write with `errno_` after taking `room` characters in all."""

    def __init__(self, errno_: int, room: int = 0) -> None:
        super().__init__()
        self.errno = errno_
        self.room = room

    def write(self, text: str) -> int:
        if self.room <= 0:
            raise OSError(self.errno, os.strerror(self.errno))
        taken = super().write(text[: self.room])
        self.room -= taken
        return taken


class LyingCounter(io.StringIO):
    """Claims a huge text was written in full while keeping only the first 2 GiB' worth:
    the cut is visible only through the count it returns."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def write(self, text: str) -> int:
        taken = min(len(text), LINUX_WRITE_CAP)
        self.total += taken
        return taken


def test_a_short_write_is_continued_until_all_is_written() -> None:
    stream = ShortWrites(cap=7)
    write_all(stream, "x" * 100, "standard output")
    assert stream.getvalue() == "x" * 100
    assert stream.calls == 15


def test_output_over_the_2gib_write_cap_is_written_in_full() -> None:
    class Huge(str):
        """A 5 GiB text without the memory: only its length and slices are used."""

        def __len__(self) -> int:
            return 5 * (1 << 30)

        def __getitem__(self, key: object) -> str:
            assert isinstance(key, slice)
            start = key.start or 0
            return Huge() if start == 0 else Rest(len(self) - start)

    class Rest(Huge):
        def __new__(cls, size: int) -> Rest:
            self = super().__new__(cls)
            self.size = size
            return self

        def __len__(self) -> int:
            return self.size  # type: ignore[no-any-return]

        def __getitem__(self, key: object) -> str:
            assert isinstance(key, slice)
            return Rest(len(self) - (key.start or 0))

    stream = LyingCounter()
    write_all(stream, Huge(), "standard output")
    assert stream.total == 5 * (1 << 30)


@pytest.mark.parametrize(
    ("code", "says"),
    [(errno.ENOSPC, "No space left on device"), (errno.EPIPE, "the reader closed the pipe")],
)
def test_a_failed_write_is_an_output_error(code: int, says: str) -> None:
    with pytest.raises(OutputError) as caught:
        write_all(Failing(code, room=5), "0123456789", "standard output")
    assert caught.value.exit_code == 1
    assert f"cannot write standard output: {says} after 5 character(s)" in caught.value.message


def test_a_stream_that_takes_nothing_is_an_error() -> None:
    with pytest.raises(OutputError, match="took nothing"):
        write_all(ShortWrites(cap=0), "abc", "f")


def test_a_closed_stream_is_an_error() -> None:
    stream = io.StringIO()
    stream.close()
    with pytest.raises(OutputError):
        CheckedStream(stream, "f").write("a")


def _cli(stdout: io.StringIO, *argv: str | Path) -> tuple[int, str]:
    err = io.StringIO()
    code = run([str(a) for a in argv], stdout, err)  # type: ignore[arg-type]
    return code, err.getvalue()


def test_the_cli_writes_a_short_writing_stdout_in_full(tmp_path: Path) -> None:
    shutil.copy(PIPELINES / "market-entry.yaml", tmp_path)
    shutil.copy(PIPELINES / "market-entry.script.yaml", tmp_path)
    whole = io.StringIO()
    assert _cli(whole, "run", tmp_path / "market-entry.yaml", "--format", "json")[0] == 0
    short = ShortWrites(cap=100)
    assert _cli(short, "run", tmp_path / "market-entry.yaml", "--format", "json")[0] == 0
    assert short.getvalue().replace("\n", "")[-50:] == whole.getvalue().replace("\n", "")[-50:]
    assert len(short.getvalue()) == len(whole.getvalue())


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EPIPE])
def test_the_cli_exits_1_when_stdout_fails_whatever_the_run_said(tmp_path: Path, code: int) -> None:
    market = tmp_path / "market-entry.yaml"
    shutil.copy(PIPELINES / "market-entry.script.yaml", tmp_path)
    # a budget that runs out: the run alone would exit 4
    text = (PIPELINES / "market-entry.yaml").read_text()
    market.write_text(text.replace("max_cycles: 20", "max_cycles: 1"))
    assert _cli(io.StringIO(), "run", market)[0] == 4
    result, err = _cli(Failing(code, room=10), "run", market)
    assert result == 1
    assert "error[CD361]: cannot write standard output: " in err


def _subprocess(args: list[str], stdout: int) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "converge_dsl", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=30,
        check=False,
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_real_full_disk_is_exit_1_with_a_message() -> None:
    with open("/dev/full", "wb") as full:
        done = _subprocess(["validate", str(PIPELINES / "market-entry.yaml")], full.fileno())
    assert done.returncode == 1
    assert b"error[CD361]: cannot write standard output: No space left on device" in done.stderr


def test_a_real_closed_pipe_is_exit_1_with_a_message() -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        done = _subprocess(["validate", str(PIPELINES / "market-entry.yaml")], write)
    finally:
        os.close(write)
    assert done.returncode == 1
    assert b"error[CD361]: cannot write standard output: the reader closed the pipe" in done.stderr


@pytest.mark.parametrize(
    "args",
    [["validate"], ["graph", "-o", "/dev/stdout"]],
    ids=["validate", "graph -o /dev/stdout"],
)
def test_a_command_started_without_standard_output_is_exit_1_with_a_message(
    args: list[str],
) -> None:
    """`converge-dsl validate P >&-`: Python starts with `sys.stdout` None; it was a
    traceback (`'NoneType' object has no attribute 'write'`)."""
    pipeline = str(PIPELINES / "market-entry.yaml")
    shell = ["sh", "-c", 'exec "$0" -m converge_dsl "$@" >&-', sys.executable]
    done = subprocess.run(
        [*shell, args[0], pipeline, *args[1:]],
        stderr=subprocess.PIPE,
        timeout=30,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(b"error[CD361]: cannot write standard output: it was closed")
    assert b"Traceback" not in done.stderr
