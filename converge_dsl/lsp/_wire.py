"""The wire: framed JSON-RPC read from the editor's stream (`read_frames`) and written
to it (`Output`).

`read_frames` is the one reader of the input stream. A frame is header lines, then a
blank line and N bytes of body. The one header read is a line `Content-Length: N`: its
name in any case, spaces or tabs around the colon, N in digits, then `\r\n` or `\n`
(`_HEADER`, the one pattern for it, also where a body is searched for the next frame's).
A header line is read up to `MAX_HEADER_LINE` bytes at a time and a body up to `limit`
bytes, so memory is bounded whatever arrives; a length over the limit drops its header.
Bytes that are not a header line (the rest of a body longer than its length said, a
body sent without a header, another header) are skipped up to the first whole
`Content-Length: N` line, even one that begins within a line: one bad frame loses that
frame only, never the session. Two `Content-Length` headers of different values drop
the frame too: reading the larger would take the frames after it. A body shorter than
its length said, followed by the next frame, is found by that frame's header within the
bytes read for it (`Frames.body`): it is answered as not JSON (ParseError, id null) and
the next frame read from its header. A body read to its whole length is handed on as it
is (answered as not JSON when it is not).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import BinaryIO

from pygls.exceptions import JsonRpcParseError

from converge_dsl.lsp._protocol import PipelineProtocol

MAX_HEADER_LINE = 8 * 1024
# The one header read, in parts: a part is whole or not begun at all in a header cut short.
_HEADER_PARTS = (
    *(re.escape(bytes([byte])) for byte in b"content-length"),
    *(rb"[ \t]*", rb":", rb"[ \t]*", rb"([0-9]+)", rb"[ \t]*", rb"\r?", rb"\n"),
)
_HEADER = re.compile(b"".join(_HEADER_PARTS), re.IGNORECASE)
_HEADER_BEGUN = re.compile(
    functools.reduce(lambda rest, part: part + b"(?:" + rest + b")?", reversed(_HEADER_PARTS))
    + rb"\Z",
    re.IGNORECASE,
)
_LOG = logging.getLogger(__name__)


class Frames:
    """The input stream, read in a worker thread so the event loop keeps answering.

    A body is taken as its bytes arrive. When the next frame's header comes within them (a
    line `Content-Length: N`), or begins at their end and goes on into that whole line in
    the bytes after them, the body was shorter than its length said: it ends there, and the
    bytes from that header on are read again as the next frame's. Neither is ever in a JSON
    body: JSON has no bare word, and no line break in a string. So the next frame is read
    whole even when the length said more than the client sends before it waits for the
    answer to that frame. A body whose end only looks like a header begun (`c`, or
    `Content-Length: 9` then no line break) is whole and handed on as it is; only a body
    that is not JSON can end so, and its answer waits for the bytes after it.
    """

    def __init__(self, stream: BinaryIO, executor: ThreadPoolExecutor | None) -> None:
        self.stream = stream
        self.executor = executor
        self.ended = False  # the stream ended within a body
        self._again = b""  # the bytes after a cut body, read again first
        # What has arrived (one read of the pipe at most), not waiting for `size` bytes.
        self._read_some: Callable[[int], bytes] = (
            stream.read1 if isinstance(stream, io.BufferedIOBase) else stream.read
        )

    async def line(self) -> bytes:
        """A header line, up to `MAX_HEADER_LINE` bytes."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._line)

    async def body(self, length: int) -> bytes:
        """The `length` bytes of a body; fewer when the stream ends (`ended`) or the next
        frame's header comes within them."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._body, length)

    def _line(self) -> bytes:
        if not self._again:
            return self.stream.readline(MAX_HEADER_LINE)
        end = self._again.find(b"\n", 0, MAX_HEADER_LINE)
        size = MAX_HEADER_LINE if end < 0 else end + 1
        line, self._again = self._again[:size], self._again[size:]
        if not line.endswith(b"\n") and len(line) < MAX_HEADER_LINE:
            line += self.stream.readline(MAX_HEADER_LINE - len(line))
        return line

    def _body(self, length: int) -> bytes:
        body = bytearray(self._again[:length])
        self._again = self._again[length:]
        start = 0  # no header begins before: each byte is searched about once
        while True:
            header = _HEADER.search(body, start)
            if header is not None:
                return self._cut(body, header.start())
            begun = _HEADER_BEGUN.search(body, max(start, len(body) - MAX_HEADER_LINE))
            if len(body) == length:
                if begun is None or not self._goes_on(body[begun.start() :]):
                    return bytes(body)
                return self._cut(body, begun.start())
            start = len(body) if begun is None else begun.start()
            piece = self._read_some(length - len(body))
            if not piece:
                self.ended = True
                return bytes(body)
            body += piece

    def _goes_on(self, begun: bytearray) -> bool:
        """Whether the header begun at the end of a body goes on, in the bytes after the body,
        into a whole `Content-Length: N` line; those bytes are read again."""
        after = bytearray()
        try:
            while True:
                text = bytes(begun + after)
                if _HEADER.match(text):
                    return True
                if len(text) > MAX_HEADER_LINE or not _HEADER_BEGUN.match(text):
                    return False
                piece, self._again = self._again or self._read_some(MAX_HEADER_LINE), b""
                if not piece:
                    return False
                after += piece
        finally:
            self._again = bytes(after) + self._again

    def _cut(self, body: bytearray, start: int) -> bytes:
        self._again = bytes(body[start:]) + self._again
        return bytes(body[:start])


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
            if len(body) < length and frames.ended:
                return  # cut off by the end of the stream
            if len(body) < length:
                protocol.fail(
                    None,
                    JsonRpcParseError(
                        f"a message's body is {len(body)} bytes, not the {length} its "
                        "Content-Length said: the next message's header came within it; "
                        "the message is skipped"
                    ),
                )
            else:
                protocol.receive(body)
            length = None
            continue
        header = _HEADER.search(line)
        if header is None:
            continue  # another header, or bytes between frames
        value = header.group(1)
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
