"""Reading a response body within a cap: raw bytes, undone `Content-Encoding`, lines.

httpx decodes a compressed body one network chunk at a time with no bound on
what one chunk expands to (a few KB of `gzip, gzip` can become gigabytes), so
the adapters never let it: `decoded_chunks` reads the raw stream and inflates
it layer by layer, each step giving at most `PIECE` bytes, counting decoded
bytes as they come and stopping at the cap. `SseLines` splits decoded bytes
into lines, refusing a line longer than its cap before it is whole
(docs/architecture.md §8).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator

import httpx

from converge_dsl.models.port import ModelError, ModelErrorCode

PIECE = 64 * 1024
MAX_ENCODINGS = 4
ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
_BREAK = re.compile(rb"\r\n|\r|\n")

OnCap = Callable[[], None]
"""Raises the error for a crossed cap (it never returns)."""


def _encoding_error(problem: str) -> ModelError:
    return ModelError(
        ModelErrorCode.WIRE,
        problem,
        hint=f"the adapter accepts Content-Encoding {ACCEPT_ENCODING} (at most "
        f"{MAX_ENCODINGS} layers); check base_url points at a compatible API",
    )


class _Inflater:
    """One `Content-Encoding` layer, giving its output `PIECE` bytes at a time."""

    __slots__ = ("_name", "_obj", "_started")

    def __init__(self, name: str) -> None:
        self._name = name
        self._obj = zlib.decompressobj(_WBITS[name])
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._obj.decompress(data, PIECE)
            except zlib.error:
                if self._name != "deflate" or self._started:
                    raise _encoding_error(f"the {self._name} body is corrupt") from None
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, no zlib header
                self._started = True
                continue
            self._started = True
            data = self._obj.unconsumed_tail
            if out:
                yield out
            if self._obj.eof or (not data and len(out) < PIECE):
                return

    def finished(self) -> bool:
        return self._obj.eof or not self._started


def content_layers(response: httpx.Response) -> list[_Inflater]:
    """The decoders for the response's `Content-Encoding`, in the order to apply them."""
    names = [
        name.strip().lower()
        for name in response.headers.get("content-encoding", "").split(",")
        if name.strip() and name.strip().lower() != "identity"
    ]
    if len(names) > MAX_ENCODINGS:
        raise _encoding_error(f"the body has {len(names)} content encodings")
    for name in names:
        if name not in _WBITS:
            raise _encoding_error(f"the body has the unsupported content encoding {name!r}")
    return [_Inflater(name) for name in reversed(names)]


def _through(layer: _Inflater, pieces: Iterable[bytes]) -> Iterator[bytes]:
    for piece in pieces:
        yield from layer.feed(piece)


async def decoded_chunks(
    response: httpx.Response, cap: int, on_cap: OnCap, *, truncate: bool = False
) -> AsyncIterator[bytes]:
    """The decoded body of `response`, in pieces of at most `PIECE` bytes.

    Past `cap` decoded bytes, `on_cap()` raises; with `truncate`, the body just
    ends there instead (an error body, of which only the start matters).
    """
    layers = content_layers(response)
    total = 0
    async for raw in response.aiter_raw():
        pieces: Iterable[bytes] = (raw,)
        for layer in layers:
            pieces = _through(layer, pieces)
        for piece in pieces:
            total += len(piece)
            if total > cap:
                if truncate:
                    yield piece[: len(piece) - (total - cap)]
                    return
                on_cap()
            yield piece
    if not all(layer.finished() for layer in layers):
        raise _encoding_error("the compressed body ended early")


async def read_capped(
    response: httpx.Response, cap: int, on_cap: OnCap, *, truncate: bool = False
) -> bytes:
    """The whole decoded body of `response`, at most `cap` bytes (see `decoded_chunks`)."""
    body = bytearray()
    async for piece in decoded_chunks(response, cap, on_cap, truncate=truncate):
        body += piece
    return bytes(body)


class SseLines:
    """Splits decoded bytes into text lines (CR, LF or CRLF), each at most `cap` bytes."""

    __slots__ = ("_buffer", "_cap", "_cr", "_on_cap")

    def __init__(self, cap: int, on_cap: OnCap) -> None:
        self._cap = cap
        self._on_cap = on_cap
        self._buffer = bytearray()
        self._cr = False  # the last chunk ended with CR: a LF first in the next belongs to it

    def feed(self, data: bytes) -> Iterator[str]:
        if self._cr and data[:1] == b"\n":
            data = data[1:]
        self._cr = False
        start = 0
        for match in _BREAK.finditer(data):
            self._buffer += data[start : match.start()]
            yield self._take()
            start = match.end()
            self._cr = match.group() == b"\r" and start == len(data)
        self._buffer += data[start:]
        if len(self._buffer) > self._cap:
            self._on_cap()

    def close(self) -> Iterator[str]:
        """The last line, if the stream did not end with a line break."""
        if self._buffer:
            yield self._take()

    def _take(self) -> str:
        if len(self._buffer) > self._cap:
            self._on_cap()
        line = self._buffer.decode("utf-8", errors="replace")
        self._buffer.clear()
        return line
