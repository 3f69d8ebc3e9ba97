"""The stdio transport of an MCP server: a child process in its own process group.

`stdio_transport(program, env, cwd, max_line_bytes)` starts the child with
exactly `env` (see `_environment`), in a new session (so its process group is
its own; on Linux it is also sent SIGKILL when this process dies, however it
dies, `with_parent_death`), and yields the SDK's message streams and the
`ChildProcess`. On exit, on a timeout or an interrupt, the whole process group
is killed (SIGTERM, then SIGKILL after a grace period) and reaped. A message line longer than
`max_line_bytes` is never held: it is skipped as it arrives and the request it
answers gets an error naming its size (so a 50 MB answer costs no 50 MB).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.shared.message import SessionMessage

KILL_GRACE_S = 2.0
STDERR_TAIL_BYTES = 4096
NOT_JSON_HEAD = 120  # how much of a stdout line that is not JSON-RPC is kept for messages
TOO_LARGE = -32099  # the JSON-RPC error code of an answer skipped for its size
_ID = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')


@dataclass
class ChildProcess:
    """The child's process id and the last bytes it wrote to stderr (for messages)."""

    pid: int
    stderr_tail: bytearray = field(default_factory=bytearray)
    returncode: int | None = None
    not_json: str = ""  # the head of the last stdout line that was not JSON-RPC

    def stderr_text(self) -> str:
        return bytes(self.stderr_tail).decode("utf-8", errors="replace").strip()


# Run in the child before the server: ask Linux to SIGKILL it when its parent dies
# (prctl(PR_SET_PDEATHSIG), kept across exec), then become the server. A parent that died
# before the request is seen as a new parent process id: the child stops at once.
_LAUNCHER = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
try:
    os.execv(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"cannot run {sys.argv[2]}: {exc.strerror}\\n")
    os._exit(127)
"""


def with_parent_death(program: Sequence[str]) -> list[str]:
    """`program` started so that it dies with this process, even by SIGKILL: on Linux,
    through a launcher that sets the parent-death signal and execs it (same process id,
    same program, same environment); elsewhere as it is (a server then ends when its
    stdin closes, which most do; docs/tools.md)."""
    if not sys.platform.startswith("linux") or not sys.executable:
        return list(program)
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(os.getpid()), *program]


def kill_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group led by `pid` (gone already: nothing to do)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class _Lines:
    """Splits the child's stdout into lines, skipping any line over `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.skipping: bytes | None = None  # the head of the line being skipped
        self.skipped = 0

    def feed(self, chunk: bytes) -> list[bytes | tuple[bytes, int]]:
        """Whole lines in `chunk` (with what came before); a skipped line is (head, size)."""
        out: list[bytes | tuple[bytes, int]] = []
        while chunk:
            end = chunk.find(b"\n")
            part, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            if self.skipping is not None:
                self.skipped += len(part)
            else:
                self.buffer += part
                if len(self.buffer) > self.limit:
                    self.skipping = bytes(self.buffer[:256])
                    self.skipped = len(self.buffer)
                    self.buffer.clear()
            if end < 0:
                break
            if self.skipping is not None:
                out.append((self.skipping, self.skipped))
                self.skipping, self.skipped = None, 0
            else:
                out.append(bytes(self.buffer))
                self.buffer.clear()
        return out


def _too_large(head: bytes, size: int, limit: int) -> SessionMessage | None:
    found = _ID.search(head)
    if found is None:
        return None
    raw = found.group(1)
    request_id: str | int = raw[1:-1].decode("utf-8", "replace") if raw[:1] == b'"' else int(raw)
    error = types.ErrorData(
        code=TOO_LARGE, message=f"the answer is {size} bytes, over the limit of {limit}"
    )
    message = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return SessionMessage(types.JSONRPCMessage(message))


@asynccontextmanager
async def stdio_transport(
    program: Sequence[str], env: dict[str, str], cwd: str, max_line_bytes: int
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        ChildProcess,
    ]
]:
    """The child's message streams (see the module docstring)."""
    process = await anyio.open_process(
        with_parent_death(program),
        env=env,
        cwd=cwd,
        start_new_session=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    child = ChildProcess(process.pid)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        lines = _Lines(max_line_bytes)
        async with read_writer:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in process.stdout:
                    for line in lines.feed(chunk):
                        if isinstance(line, tuple):
                            skipped = _too_large(*line, max_line_bytes)
                            if skipped is not None:
                                await read_writer.send(skipped)
                            continue
                        if not line.strip():
                            continue
                        try:
                            message = types.JSONRPCMessage.model_validate_json(line)
                        except ValueError as exc:
                            child.not_json = repr(line[:NOT_JSON_HEAD].decode("utf-8", "replace"))
                            await read_writer.send(exc)
                            continue
                        await read_writer.send(SessionMessage(message))

    async def read_stderr() -> None:
        assert process.stderr is not None
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in process.stderr:
                child.stderr_tail += chunk
                del child.stderr_tail[:-STDERR_TAIL_BYTES]

    async def write_stdin() -> None:
        assert process.stdin is not None
        async with write_reader:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for message in write_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    await process.stdin.send((text + "\n").encode("utf-8"))

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read_stdout)
            group.start_soon(read_stderr)
            group.start_soon(write_stdin)
            try:
                yield read_stream, write_stream, child
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process, child)


async def _stop(process: anyio.abc.Process, child: ChildProcess) -> None:
    """Kill the child's process group (TERM, then KILL) and reap the child."""
    kill_group(process.pid, signal.SIGTERM)
    with anyio.move_on_after(KILL_GRACE_S):
        child.returncode = await process.wait()
    kill_group(process.pid, signal.SIGKILL)
    if child.returncode is None:
        child.returncode = await process.wait()
    # The process's own close: it closes the pipes' transports too. A stream's close
    # left them open, and while a helper the server started outside its process group
    # holds its stdout or stderr, no end comes to close them: the process's transport,
    # collected after the loop closed, printed "Exception ignored ... Event loop is
    # closed". (The child is reaped: this waits for nothing.)
    with contextlib.suppress(Exception):
        await process.aclose()
