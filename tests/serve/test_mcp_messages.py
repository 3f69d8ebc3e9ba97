"""Malformed MCP messages over real HTTP: refused before the SDK reads them, as the HTTP
API refuses a body (400, CD983, a pointer, the service's words), nothing queued, no
traceback in the server's log; the SDK's session still answers good messages."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.serve._store import STATE_FILE

from .conftest import DATA, Server, serve_with_token

TOKEN = "5e7b1d4a9f8e2c6b3a1d0f9e8cc0ffee"
HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def _call(arguments: Any, **params: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    message["params"] = {"name": "echo", "arguments": arguments, **params}
    return json.dumps(message).encode()


CALL_HEAD = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", '


@pytest.mark.parametrize(
    ("body", "pointers", "says"),
    [
        (b"[" * 100_000, [""], "nests deeper"),
        (
            CALL_HEAD + b'"arguments": {"text": ' + b"9" * 10_000 + b"}}}",
            ["/params/arguments/text"],
            "digits",
        ),
        (CALL_HEAD + b'"arguments": {"text": 1e99999}}}', ["/params/arguments/text"], "not finite"),
        (
            CALL_HEAD + b'"arguments": {"text": "\\ud800"}}}',
            ["/params/arguments/text"],
            "surrogate",
        ),
        (b"hello", [""], "not JSON (line 1, column 1)"),
        (b"[]", [""], "batch"),
        (
            json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}] * 2).encode(),
            [""],
            "batch",
        ),
        (b'{"jsonrpc": "2.0", "id": 1}', ["/method"], "no `method`"),
        (
            b'{"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}}',
            ["/error"],
            "not both",
        ),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "foo/bar"}', ["/method"], "no request 'foo/bar'"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}', ["/params"], "needs this field"),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": '
            b'{"protocolVersion": "1", "capabilities": 5, '
            b'"clientInfo": {"name": "x", "version": "1"}}}',
            ["/params/capabilities"],
            "does not take this value",
        ),
        (b'{"jsonrpc": "1.0", "id": {}, "method": 5}', ["/jsonrpc", "/id", "/method"], "must"),
        (_call([1]), ["/params/arguments"], "`arguments` must be a JSON object"),
        (_call("x"), ["/params/arguments"], "`arguments` must be a JSON object"),
        (
            _call({"text": "a"}, _meta={"progressToken": {"a": 1}}),
            ["/params/_meta/progressToken"],
            "progressToken",
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}}',
            ["/params/name"],
            "`name`",
        ),
    ],
)
def test_a_malformed_message_is_a_located_400(
    tmp_path: Path, servers: list[Server], body: bytes, pointers: list[str], says: str
) -> None:
    import httpx

    server = serve_with_token(tmp_path, servers, [DATA], TOKEN, "--mcp")
    url = server.ready()
    with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as http:
        answer = http.post("/mcp", content=body)
        assert answer.status_code == 400, answer.text
        errors = answer.json()["errors"]
        assert [e["pointer"] for e in errors] == pointers
        assert all(e["code"] == "CD983" for e in errors)
        assert says in errors[0]["message"]
        assert "pydantic" not in answer.text
        # `params: null` is no params, as the MCP SDK reads it
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": None}
        good = http.post("/mcp", json=listing)
        assert good.status_code == 200
        assert '"tools"' in good.text
    with sqlite3.connect(tmp_path / "state" / STATE_FILE) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    server.stop()
    assert "Traceback" not in "".join(server.stderr)
    assert "validation error" not in "".join(server.stderr)


def test_a_message_cut_short_or_chunked_past_the_cap_leaves_no_traceback(
    tmp_path: Path, servers: list[Server]
) -> None:
    import httpx

    server = Server([DATA / "echo.yaml"], tmp_path / "state", "--mcp", "--body-cap", "300")
    servers.append(server)
    url = server.ready()
    host, port = url.removeprefix("http://").rsplit(":", 1)
    head = "".join(f"{k}: {v}\r\n" for k, v in HEADERS.items())
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\n{head}".encode())
        sock.sendall(b'Content-Length: 100\r\n\r\n{"json')
        time.sleep(0.2)

    def chunks() -> Any:
        for _ in range(10):
            yield b"x" * 100

    answer = httpx.post(f"{url}/mcp", content=chunks(), headers=HEADERS, timeout=30)
    assert answer.status_code == 413
    assert answer.json()["errors"][0]["code"] == "CD989"
    time.sleep(0.3)
    assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
    server.stop()
    assert "Traceback" not in "".join(server.stderr)


def test_a_get_of_the_endpoint_is_405_at_once(tmp_path: Path, servers: list[Server]) -> None:
    import httpx

    server = serve_with_token(tmp_path, servers, [DATA], TOKEN, "--mcp")
    url = server.ready()
    answer = httpx.get(f"{url}/mcp", headers=HEADERS, timeout=10)  # not an idle stream
    assert answer.status_code == 405
    assert answer.headers["allow"] == "POST"
    assert answer.json()["errors"][0]["code"] == "CD990"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_the_transports_own_refusals_are_the_services_json(
    tmp_path: Path, servers: list[Server]
) -> None:
    """The SDK's DNS-rebinding and media checks, made first in the service's words: a Host
    without a port or of another name (421), an Origin (403), a POST that is not
    application/json (415) or does not accept both JSON and SSE (406); a loopback Host
    with its port still answered."""
    server = serve_with_token(tmp_path, servers, [DATA], TOKEN, "--mcp")
    url = server.ready()
    listing = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'

    def curl(*headers: str) -> tuple[int, Any]:
        given = [
            f"{k}: {v}" for k, v in HEADERS.items() if not any(h.startswith(k) for h in headers)
        ]
        done = subprocess.run(
            ["curl", "-s", "-w", "\n%{http_code}", "-d", listing, f"{url}/mcp"]
            + [arg for header in [*given, *headers] for arg in ("-H", header)],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        text, _, status = done.stdout.rpartition("\n")
        return int(status), text

    port = url.rsplit(":", 1)[1]
    for host in (
        "127.0.0.1",
        "localhost",
        f"evil.example:{port}",
        f"127.0.0.1.evil.example:{port}",
    ):
        status, text = curl(f"Host: {host}")
        assert status == 421, host
        (problem,) = json.loads(text)["errors"]
        assert problem["code"] == "CD444"
        assert problem["message"].startswith(f"the Host header {host!r} is not this server's")
    status, text = curl("Origin: http://evil.example")
    assert (status, json.loads(text)["errors"][0]["code"]) == (403, "CD444")
    status, text = curl("Content-Type: application/x-www-form-urlencoded")
    assert (status, json.loads(text)["errors"][0]["code"]) == (415, "CD307")
    for accept in ("application/json", "text/event-stream", "*/*"):
        status, text = curl(f"Accept: {accept}")  # it was the SDK's JSON-RPC error
        (problem,) = json.loads(text)["errors"]
        assert (status, problem["code"]) == (406, "CD449")
        assert problem["message"].startswith(f"the Accept header {accept!r} does not list ")
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        status, text = curl(f"Host: {host}")
        assert status == 200, text
        assert '"tools"' in text
    with sqlite3.connect(tmp_path / "state" / STATE_FILE) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_a_protocol_version_the_server_does_not_speak_is_the_services_400(
    tmp_path: Path, servers: list[Server]
) -> None:
    """An `MCP-Protocol-Version` header the SDK does not speak (made up, or not ASCII):
    400 in the service's JSON with CD460 and the versions it speaks; it was the SDK's
    JSON-RPC error with the made-up id "server-error" and no code. A version it speaks
    is answered, and so is `initialize`, which negotiates the version in its body."""
    import httpx

    server = serve_with_token(tmp_path, servers, [DATA], TOKEN, "--mcp")
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with httpx.Client(base_url=server.ready(), headers=HEADERS, timeout=30) as http:
        for version in (b"1999-01-01", b"latest", "\u00e9t\u00e9".encode("latin-1")):
            answer = http.post("/mcp", json=listing, headers={"MCP-Protocol-Version": version})
            assert answer.status_code == 400, answer.text
            (problem,) = answer.json()["errors"]
            assert problem["code"] == "CD460"
            assert problem["message"].startswith("the MCP-Protocol-Version header ")
            assert "2025-06-18" in problem["hint"]
        spoken = http.post("/mcp", json=listing, headers={"MCP-Protocol-Version": "2025-06-18"})
        assert spoken.status_code == 200
        assert '"tools"' in spoken.text
        hello = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        answer = http.post("/mcp", json=hello, headers={"MCP-Protocol-Version": "1999-01-01"})
        assert answer.status_code == 200
