"""A request's head on the wire, before the application sees it: bounded, and refused
in the service's JSON.

`protocol(head_cap)` is the HTTP/1.1 protocol class `serve` gives
uvicorn (`Config(http=...)`): uvicorn's own (httptools' parser where it is
installed, as uvicorn picks, else h11's), with two changes at the edge where
uvicorn reads bytes, before any route or middleware runs:

- A head (the request line and headers) holds at most `head_cap` bytes: past
  them the connection answers 431 (CD442) and stops reading, so memory does
  not grow with what a client sends (httptools would otherwise gather a header
  of any length).
- A request the parser refuses (a bad request line, header or Content-Length)
  is answered 400 (CD441) with the parser's reason, instead of uvicorn's plain
  text.

Each refusal is the service's `{"errors": [...]}` document with
`Connection: close`; the connection then stops writing, discards what the
client still sends for at most `LINGER_S` seconds (closing at once could reset
the connection before the client reads the answer) and closes. The bytes of a
next request that arrive in the same read as the end of the one before are
not counted: a head is bounded to `head_cap` plus one read.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from converge_dsl import codes

from ._requests import Problem

HEAD_CAP = 64 * 1024
# How long a refused connection reads (and drops) what its client still sends.
LINGER_S = 2.0

_REASONS = {400: b"Bad Request", 431: b"Request Header Fields Too Large"}


def protocol(head_cap: int = HEAD_CAP, parser: str | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol class with the head bounded (see the module docstring):
    of `parser` "httptools" or "h11", by default httptools' where it is installed (as
    uvicorn chooses). With h11, uvicorn's `h11_max_incomplete_event_size` must be no
    lower than `head_cap` (else h11 refuses a smaller head first, as a malformed one)."""
    if parser is None:
        try:
            import httptools  # noqa: F401
        except ImportError:  # pragma: no cover (the test environment has httptools)
            parser = "h11"
        else:
            parser = "httptools"
    make = _h11_protocol if parser == "h11" else _httptools_protocol
    return make(head_cap)


def answer(status: int, problem: Problem, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A whole HTTP/1.1 answer: `problem` as the service's JSON errors, `Connection: close`."""
    body = json.dumps(
        {"errors": [problem.data()]}, ensure_ascii=False, separators=(",", ":")
    ).encode()
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])]
    lines += [name + b": " + value + b"\r\n" for name, value in default_headers]
    lines += [
        b"content-type: application/json\r\n",
        b"content-length: %d\r\n" % len(body),
        b"connection: close\r\n\r\n",
        body,
    ]
    return b"".join(lines)


def malformed(reason: str) -> Problem:
    shown = f": {reason[:200]}" if reason else ""
    return Problem(
        codes.SERVE_BAD_HTTP,
        f"the request is not valid HTTP/1.1{shown}",
        "",
        "send a request line `METHOD /path HTTP/1.1`, then `Name: value` headers of "
        "visible ASCII, a Content-Length of digits only, and an empty line",
    )


def too_large(head_cap: int) -> Problem:
    return Problem(
        codes.SERVE_HEAD_TOO_LARGE,
        f"the request line and headers are over {head_cap} bytes",
        "",
        "send fewer or shorter headers (a long value belongs in the body)",
    )


class _Bounded:
    """What both protocol classes add (see the module docstring); `_reading_head` says
    whether the parser is between requests or inside a head, as each parser knows it."""

    head_cap: int
    # uvicorn's protocol attributes this uses
    transport: asyncio.Transport
    cycle: Any
    loop: asyncio.AbstractEventLoop
    server_state: Any

    _head_size = 0
    _linger: asyncio.TimerHandle | None = None
    _refused = False

    def _reading_head(self) -> bool:
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: what the client still sends is dropped
        if not self._reading_head():
            self._fed(data)
            return
        room = self.head_cap - self._head_size
        if len(data) <= room:
            self._head_size += len(data)
            self._fed(data)
            return
        self._head_size = self.head_cap
        if room:
            self._fed(data[:room])
        if self._reading_head() and not self._refused and not self.transport.is_closing():
            self._refuse(431, too_large(self.head_cap))
            return
        if not self._refused and not self.transport.is_closing():
            self.data_received(data[room:])

    def _fed(self, data: bytes) -> None:
        """`data` to uvicorn's parser; a head it completed starts the next one's count."""
        cycle = self.cycle
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not cycle:
            self._head_size = 0

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request its parser refused, called in the parser's
        `except`: the service's JSON, with the parser's reason."""
        error = sys.exc_info()[1]
        self._refuse(400, malformed(str(error) if error is not None else ""))

    def _refuse(self, status: int, problem: Problem) -> None:
        """Answer `problem`, then linger (see the module docstring)."""
        self._refused = True
        transport = self.transport
        transport.write(answer(status, problem, self.server_state.default_headers))
        if not transport.can_write_eof():  # pragma: no cover (TLS: no half-close)
            transport.close()
            return
        transport.write_eof()
        self._linger = self.loop.call_later(LINGER_S, transport.close)


def _httptools_protocol(head_cap: int) -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(_Bounded, HttpToolsProtocol):
        _in_head = True

        def _reading_head(self) -> bool:
            return self._in_head

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head = True

    Protocol.head_cap = head_cap
    return Protocol


def _h11_protocol(head_cap: int) -> type[asyncio.Protocol]:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(_Bounded, H11Protocol):
        def _reading_head(self) -> bool:
            return bool(self.conn.their_state is h11.IDLE)

    Protocol.head_cap = head_cap
    return Protocol
