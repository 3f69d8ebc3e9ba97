"""The worker processes' pipes, and how a caller sees a worker end (`_one_workers`).

`Frames` reads the objects `multiprocessing.connection.Connection.send` (or
`send_bytes` of `pickled(message)`) wrote to a pipe a buffer at a time: one read,
one hand-off of the interpreter's lock, takes what came together. `wait_exit`
returns once a child process has ended, without reaping it, by a pidfd (which no
process the child forks holds, unlike its pipe and sentinel).
"""

from __future__ import annotations

import os
import pickle
import select
from typing import Any

__all__ = ["Frames", "pickled", "wait_exit"]


def wait_exit(process: Any) -> None:
    """Return once `process` (a child of this one) has ended, without reaping it: by a
    pidfd (Linux), which no other process holds, else by its sentinel."""
    try:
        fd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return  # reaped already: it ended
    except (AttributeError, OSError):
        from multiprocessing.connection import wait

        wait([process.sentinel])
        return
    try:
        poller = select.poll()  # not `select.select`: the pidfd may be numbered past 1023
        poller.register(fd, select.POLLIN)
        poller.poll()
    finally:
        os.close(fd)


class Frames:
    """The objects `Connection.send` wrote to a pipe, read a buffer at a time: one read
    (one hand-off of the interpreter's lock, on the reading thread) takes what came
    together, where `Connection.recv` would wait, then read a length and an object,
    each a hand-off of its own. Not thread-safe: one reader per pipe."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def read(self, fd: int) -> list[Any]:
        """The objects whole after one read of `fd` or more (it blocks while none is
        whole); `EOFError` at the pipe's end."""
        while True:
            chunk = os.read(fd, _READ)
            if not chunk:
                raise EOFError
            self._buffer += chunk
            done = self._split()
            if done:
                return done

    def _split(self) -> list[Any]:
        """The objects whole in the buffer, taken out of it (`Connection._send_bytes`'s
        frames: a signed 4-byte length, or -1 and an 8-byte one)."""
        buffer, start, out = self._buffer, 0, []
        while len(buffer) - start >= 4:
            size, head = int.from_bytes(buffer[start : start + 4], "big", signed=True), 4
            if size == -1:
                if len(buffer) - start < 12:
                    break
                size, head = int.from_bytes(buffer[start + 4 : start + 12], "big"), 12
            end = start + head + size
            if len(buffer) < end:
                break
            out.append(pickle.loads(buffer[start + head : end]))
            start = end
        del buffer[:start]
        return out


# How much one read of a pipe takes at most (bytes).
_READ = 1 << 16


def pickled(message: object) -> bytes:
    """`message` as `Connection.send` pickles it, without the reducers of multiprocessing's
    own objects it copies a table of for each message (no message holds one)."""
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
