"""A loopback HTTP server that answers with raw bytes of the test's choosing.

Each test gives a `respond(request, send)` function: it reads the parsed request
(method line, lower-cased headers, body, the API key the client sent) and
writes whatever bytes it likes with `send`, which stops once the client has
gone or `MAX_SENT` bytes were sent, so an "endless" answer always ends.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

MAX_SENT = 256 * 1024 * 1024


@dataclass(frozen=True)
class RawRequest:
    line: str
    headers: dict[str, str]
    body: bytes

    @property
    def api_key(self) -> str:
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") if auth else self.headers.get("x-api-key", "")


class Gone(Exception):
    """The client closed the connection (or the send budget is spent)."""


class Sender:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.sent = 0

    def __call__(self, data: bytes) -> None:
        if self.sent + len(data) > MAX_SENT:
            raise Gone
        try:
            self._sock.sendall(data)
        except OSError:
            raise Gone from None
        self.sent += len(data)

    def forever(self, chunks: Iterator[bytes], pause_s: float = 0.0) -> None:
        for chunk in chunks:
            self(chunk)
            if pause_s:
                time.sleep(pause_s)


Respond = Callable[[RawRequest, Sender], None]


def _read_request(stream: socketserver.StreamRequestHandler) -> RawRequest:
    line = stream.rfile.readline(65536).decode("latin-1").strip()
    headers: dict[str, str] = {}
    while True:
        raw = stream.rfile.readline(65536).decode("latin-1")
        if raw in ("\r\n", "\n", ""):
            break
        name, _, value = raw.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = stream.rfile.read(int(headers.get("content-length", "0")))
    return RawRequest(line, headers, body)


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        try:
            request = _read_request(self)
        except OSError:
            return
        self.server.seen.append(request)
        with contextlib.suppress(Gone):
            self.server.respond(request, Sender(self.connection))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, respond: Respond) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.respond = respond
        self.seen: list[RawRequest] = []

    def handle_error(self, request: object, client_address: object) -> None:
        return None


class HostileServer:
    """`with HostileServer(respond) as server:` serves on `server.url` in a thread."""

    def __init__(self, respond: Respond) -> None:
        self._server = _Server(respond)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[RawRequest]:
        return list(self._server.seen)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def head(status: int = 200, kind: str = "application/json", **headers: str) -> bytes:
    """A status line and headers with no length: the body runs until the connection closes."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Type: {kind}", "Connection: close"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def whole(body: bytes, status: int = 200, kind: str = "application/json", **headers: str) -> bytes:
    """A complete response with a Content-Length."""
    return head(status, kind, content_length=str(len(body)), **headers) + body
