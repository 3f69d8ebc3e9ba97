"""A request's head over a real socket: a malformed one refused (400) as the
service's JSON with its code, and no traceback in the server's log."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from .conftest import DATA, Server, serve_with_token

TOKEN = "5ca1ab1e0ddba11c0ffee0123456789a"


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def exchange(url: str, data: bytes, *, seconds: float = 10.0) -> bytes:
    """Send `data` on a new connection and read until the server closes it."""
    with socket.create_connection(_address(url), timeout=seconds) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out


def refusal(raw: bytes) -> tuple[int, str, str, dict[str, str]]:
    """The status, the code, the message and the headers of one answer that closes."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    (problem,) = json.loads(body)["errors"]
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    return int(status_line.split()[1]), problem["code"], problem["message"], headers


@pytest.fixture
def served(tmp_path: Path, servers: list[Server]) -> Server:
    server = serve_with_token(tmp_path, servers, [DATA], TOKEN)
    server.ready()
    return server


@pytest.mark.parametrize(
    ("request_head", "reason"),
    [
        (b"GET  /healthz HTTP/1.1 junk\r\nHost: x\r\n\r\n", "Expected CRLF after version"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", "Invalid header token"),
        (b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n", "Content-Length"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "Invalid method"),  # TLS to plain HTTP
    ],
)
def test_a_malformed_request_is_the_services_json(
    served: Server, request_head: bytes, reason: str
) -> None:
    status, code, message, _ = refusal(exchange(served.url, request_head))
    assert (status, code) == (400, "CD441")
    assert message.startswith("the request is not valid HTTP/1.1: ")
    assert reason in message
    assert "Traceback" not in "".join(served.stderr)
