"""The wire: framed JSON-RPC read from the editor's stream (`read_frames`) and written
to it (`Output`).

`read_frames` is the one reader of the input stream. A frame is header lines
(`Content-Length: N` is the one read; a header's name in any case, a line ended
by `\\r\\n` or `\\n`) then a blank line and N bytes. A header line is read up to
`MAX_HEADER_LINE` bytes at a time and a body up to `limit` bytes, so memory is
bounded whatever arrives; a length over the limit, or not a number, drops its
header. Bytes that are not a header (the rest of a body shorter than its
length said, a body sent without a header) are skipped up to the next
`Content-Length` header, even one on the same line: one bad frame loses that
frame only, never the session. Two `Content-Length` headers of different values
drop the frame too: reading the larger would take the frames after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from converge_dsl.lsp._protocol import PipelineProtocol

MAX_HEADER_LINE = 8 * 1024
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
_LOG = logging.getLogger(__name__)


class Frames:
    """The input stream, read in a worker thread so the event loop keeps answering."""

    def __init__(self, stream: BinaryIO, executor: ThreadPoolExecutor | None) -> None:
        self.stream = stream
        self.executor = executor

    async def line(self) -> bytes:
        return await self._run(self.stream.readline, MAX_HEADER_LINE)

    async def body(self, length: int) -> bytes:
        return await self._run(self.stream.read, length)

    async def _run(self, read: Callable[[int], bytes], size: int) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self.executor, read, size)


class Output:
    """The stream the client reads, written and flushed a message at a time (pygls's writer).

    Once the client has closed it (a broken pipe, or any other failure to write), the
    client is gone: nothing is written again, and `stop` is set, so the server ends at
    the next message it reads (or the end of its input). Writing on raised from a future's
    callback, where pygls and `concurrent.futures` wrote a traceback for each message,
    and the server served a client that could read none of it.
    """

    def __init__(self, stream: BinaryIO, stop: threading.Event) -> None:
        self.stream = stream
        self.stop = stop
        self.gone = False

    def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self.stream.write(data)
            self.stream.flush()
        except OSError as exc:
            self.gone = True
            self.stop.set()
            _LOG.error("the client no longer reads the server's output (%s): stopping", exc)

    def close(self) -> None:
        """Close the stream; the bytes a gone client did not read are dropped."""
        with contextlib.suppress(OSError):
            self.stream.close()


async def read_frames(
    frames: Frames, protocol: PipelineProtocol, stop: threading.Event, limit: int
) -> None:
    """Hand each frame's body to `protocol.receive` until the stream ends or `stop` is set.

    A message whose headers hold two Content-Length values that differ as written (`187`
    and `0187` differ too) is skipped: every later Content-Length up to the blank line
    that ends its headers is refused, one equal to the first included."""
    length: int | None = None
    written: bytes | None = None  # the Content-Length of the headers being read, as written
    disagreed = False  # two of these headers' Content-Length differ: the message is skipped
    while not stop.is_set():
        line = await frames.line()
        if not line:
            return
        if not line.strip():
            written, disagreed = None, False
            if length is None:
                continue
            body = await frames.body(length)
            if len(body) < length:
                return  # cut off by the end of the stream
            length = None
            protocol.receive(body)
            continue
        header = _CONTENT_LENGTH.search(line)
        if header is None:
            continue  # another header, or bytes between frames
        value = header.group(1).strip()
        if disagreed:
            continue
        if written is not None and value != written:
            # Which one is the body's? Either read could take the frames after it.
            length, disagreed = None, True
            protocol.log(
                f"a message has two Content-Length headers ({_ascii(written)!r} and "
                f"{_ascii(value)!r}): the message is skipped"
            )
            continue
        written = value
        length = int(value) if value.isdigit() and len(value) <= 20 else None
        if length is not None and length > limit:
            length = None
        if length is None:
            protocol.log(
                f"a message's Content-Length {_ascii(value)!r} is not a number of bytes up to "
                f"{limit}: the message is skipped"
            )


def _ascii(value: bytes) -> str:
    return value[:40].decode("ascii", "replace")
