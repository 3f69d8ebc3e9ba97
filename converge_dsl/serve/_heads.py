"""A request's head on the wire, before the application sees it: refused in the
service's JSON.

`protocol()` is the HTTP/1.1 protocol class `serve` gives uvicorn
(`Config(http=...)`): uvicorn's own (httptools' parser where it is installed,
as uvicorn picks, else h11's), changed at the edge where uvicorn reads bytes,
before any route or middleware runs: a request the parser refuses (a bad
request line, header or Content-Length) is answered 400 (CD441) with the
parser's reason, instead of uvicorn's plain text.

Each refusal is the service's `{"errors": [...]}` document with
`Connection: close`; the connection then stops writing, discards what the
client still sends for at most `LINGER_S` seconds (closing at once could reset
the connection before the client reads the answer) and closes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from converge_dsl import codes

from ._requests import Problem

# How long a refused connection reads (and drops) what its client still sends.
LINGER_S = 2.0

_REASONS = {400: b"Bad Request"}


def protocol() -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol class, its refusals JSON (see the module docstring)."""
    try:
        import httptools  # noqa: F401 (uvicorn's choice: httptools when installed)
    except ImportError:  # pragma: no cover (the test environment has httptools)
        return _h11_protocol()
    return _httptools_protocol()


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


class _Bounded:
    """What both protocol classes add (see the module docstring)."""

    # uvicorn's protocol attributes this uses
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    server_state: Any

    _linger: asyncio.TimerHandle | None = None
    _refused = False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # lingering: what the client still sends is dropped
        super().data_received(data)  # type: ignore[misc]

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


def _httptools_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(_Bounded, HttpToolsProtocol):
        pass

    return Protocol


def _h11_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(_Bounded, H11Protocol):
        pass

    return Protocol
