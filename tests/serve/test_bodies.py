"""Request bodies over real HTTP: read once, bounded in size and time, JSON only, each
refusal located; a client going away mid-body leaves no traceback in the server's log."""

from __future__ import annotations

import asyncio
import gzip
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from converge_dsl.serve._bodies import MAX_DEPTH, parse_json
from converge_dsl.serve._requests import Refused
from converge_dsl.serve._store import STATE_FILE

from .conftest import DATA, Server, in_process, serve_with_token

TOKEN = "c0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUNS = "/v1/pipelines/echo/runs"


def problems(call: Any) -> list[tuple[str, str]]:
    with pytest.raises(Refused) as caught:
        call()
    return [(p.code, p.pointer) for p in caught.value.problems]


def test_json_is_strict_and_bounded() -> None:
    assert problems(lambda: parse_json(b"[NaN]")) == [("CD983", "/0")]
    assert problems(lambda: parse_json(b'{"inputs": {"a": "\\udfff"}}')) == [("CD983", "/inputs/a")]
    assert problems(lambda: parse_json(b'{"inputs": {"a": "\xed\xbf\xbf"}}')) == [("CD983", "")]
    utf16 = '{"a": "\udfff"}'.encode("utf-16-le", "surrogatepass")
    assert problems(lambda: parse_json(utf16)) == [("CD983", "")]
    assert parse_json(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    deep = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    assert problems(lambda: parse_json(deep)) == [("CD983", "")]
    assert problems(lambda: parse_json(b"[" * 100_000)) == [("CD983", "")]


@pytest.fixture
def served(tmp_path: Path, servers: list[Server]) -> Iterator[tuple[Server, httpx.Client]]:
    server = serve_with_token(tmp_path, servers, [DATA], TOKEN)
    with httpx.Client(base_url=server.ready(), headers=AUTH, timeout=30) as http:
        yield server, http


def _runs(state: Path) -> int:
    with sqlite3.connect(state / STATE_FILE, timeout=5) as db:
        return int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def _raw(url: str, head: str, body: bytes = b"") -> None:
    """Send a request's head and part of its body, then go away without reading."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("body", "pointer", "says"),
    [
        (b'{"inputs": {"text": 1e999999}}', "/inputs/text", "not finite"),
        # JSON in UTF-16: its digits have NULs between them (a bytes search missed them)
        ('{"inputs": {"text": 1e999}}'.encode("utf-16-le"), "/inputs/text", "not finite"),
        (b'{"inputs": {"text": ' + b"9" * 100_000 + b"}}", "/inputs/text", "100000 digits"),
        (b'{"budget": {"max_cycles": ' + b"9" * 5000 + b"}}", "/budget/max_cycles", "5000 digits"),
        (b'{"inputs": {"text": "a"}, "inputs": {"text": "b"}}', "/inputs", "given twice"),
        (b'{"inputs": {"text": "a", "text": "b"}}', "/inputs/text", "given twice"),
        (b'{"inputs": {"text": ["x", "\\ud800"]}}', "/inputs/text/1", "lone surrogate"),
        (b'{"inputs": {"\\udc00": "x"}}', "/inputs", "key '\\udc00' holds a lone surrogate"),
    ],
)
def test_a_value_a_run_cannot_carry_is_refused_where_it_is(
    served: tuple[Server, httpx.Client], body: bytes, pointer: str, says: str
) -> None:
    server, http = served
    answer = http.post(f"{RUNS}?wait=true", content=body)
    assert answer.status_code == 400
    (problem,) = answer.json()["errors"]
    assert (problem["code"], problem["pointer"]) == ("CD983", pointer)
    assert says in problem["message"]
    assert "sys.set_int_max_str_digits" not in answer.text
    assert http.get("/v1/runs/" + "0" * 32).status_code == 404  # still serving
    assert "Traceback" not in "".join(server.stderr)


def test_text_that_is_not_utf8_or_not_json_is_told_in_the_services_words(
    served: tuple[Server, httpx.Client],
) -> None:
    _, http = served
    answer = http.post(RUNS, content=b'{"inputs": {"text": "\xff"}}')
    assert answer.status_code == 400
    message = answer.json()["errors"][0]["message"]
    assert message == "the request body is not UTF-8 text: byte 0xff at offset 21 cannot be decoded"
    answer = http.post(RUNS, content=b'{"inputs": ')
    assert answer.json()["errors"][0]["message"] == (
        "the request body is not JSON (line 1, column 12): Expecting value"
    )


def test_a_compressed_body_or_another_media_type_is_415(
    served: tuple[Server, httpx.Client], tmp_path: Path
) -> None:
    _, http = served
    body = gzip.compress(b'{"inputs": {"text": "a"}}')
    answer = http.post(RUNS, content=body, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 415
    assert answer.json()["errors"][0]["code"] == "CD307"
    answer = http.post(
        RUNS, content=b"<inputs/>", headers={"Content-Type": "application/xml; charset=utf-8"}
    )
    assert (answer.status_code, answer.json()["errors"][0]["code"]) == (415, "CD307")
    # the types clients give a raw body by default are read as JSON (`curl -d`)
    for media in ("application/x-www-form-urlencoded", "text/plain", "application/merge+json"):
        answer = http.post(
            f"{RUNS}?wait=true",
            content=b'{"inputs": {"text": "a"}}',
            headers={"Content-Type": media},
        )
        assert answer.status_code == 200, media
    assert _runs(tmp_path / "state") == 3


def test_a_client_gone_before_its_body_ended_leaves_no_traceback(
    served: tuple[Server, httpx.Client], tmp_path: Path
) -> None:
    server, http = served
    head = f"POST {RUNS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
    _raw(server.url, head + "Content-Length: 100\r\n\r\n", b'{"inputs"')
    _raw(server.url, head + "Transfer-Encoding: chunked\r\n\r\n", b'100\r\n{"inputs"')
    time.sleep(0.5)
    assert http.get("/healthz").json()["status"] == "ok"
    assert "Traceback" not in "".join(server.stderr)
    assert "ClientDisconnect" not in "".join(server.stderr)
    assert _runs(tmp_path / "state") == 0


def test_a_body_that_does_not_arrive_in_time_is_408(tmp_path: Path) -> None:
    from converge_dsl.serve._app import HttpLimits

    with in_process(tmp_path / "state", HttpLimits(body_s=0.5)) as url:
        port = int(url.rsplit(":", 1)[1])

        async def slow() -> Any:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"POST {RUNS} HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{{".encode()
            )
            await writer.drain()
            for _ in range(20):  # a byte every 0.1 s: 2 s for the body, over the 0.5 s
                await asyncio.sleep(0.1)
                writer.write(b" ")
                with_answer = reader.at_eof() or len(reader._buffer) > 0  # type: ignore[attr-defined]
                if with_answer:
                    break
                await writer.drain()
            answer = await asyncio.wait_for(reader.read(4096), 10)
            writer.close()
            return answer

        answer = asyncio.run(slow())
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b'"code":"CD308"' in answer


def test_a_fault_of_the_service_is_a_json_500_its_traceback_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A handler that raises what no refusal names: the client gets the service's JSON
    with CD445 and nothing of the fault; it got Starlette's plain 'Internal Server Error'."""
    import httpx

    from converge_dsl.serve import ServeOptions, prepare
    from converge_dsl.serve._app import HttpLimits, _Api, build_app

    async def broken(self: object, request: object) -> None:
        raise RuntimeError("secret internals /srv/state")

    monkeypatch.setattr(_Api, "pipelines", broken)
    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "state"))
    try:
        app = build_app(prepared.service, None, HttpLimits())

        async def get() -> httpx.Response:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
                return await client.get("/v1/pipelines")

        answer = asyncio.run(get())
    finally:
        prepared.service.store.close()
    assert answer.status_code == 500
    (problem,) = answer.json()["errors"]
    assert problem["code"] == "CD445"
    assert "secret" not in answer.text
    assert "RuntimeError: secret internals" in caplog.text  # the operator's log has it


def test_a_charset_other_than_utf8_is_415_on_every_route_with_a_body(tmp_path: Path) -> None:
    """A body declared in another charset would be read as UTF-8 all the same: refused,
    the charset named, on the runs, the decisions and the MCP endpoint; UTF-8 declared
    (in any case, quoted or not) is read."""
    from converge_dsl.serve._app import HttpLimits

    with (
        in_process(tmp_path / "state", HttpLimits(), mcp=True) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        run = http.post(RUNS, json={"inputs": {"text": "a"}}).json()["id"]
        for route in (RUNS, f"/v1/runs/{run}/decisions", "/mcp"):
            for given in (
                "application/json; charset=latin-1",
                'application/json; charset="ISO-8859-1"',
                "application/json;CHARSET=utf-16",
            ):
                answer = http.post(
                    route,
                    content='{"inputs": {"text": "é"}}'.encode("latin-1"),
                    headers={
                        "Content-Type": given,
                        "Accept": "application/json, text/event-stream",
                    },
                )
                error = answer.json()["errors"][0]
                assert (answer.status_code, error["code"]) == (415, "CD307"), (route, given)
                assert given.rsplit("=", 1)[1].strip('"') in error["message"]
                assert "UTF-8" in error["hint"]
        for given in ("application/json; charset=UTF-8", 'application/json; charset="utf-8"'):
            answer = http.post(
                f"{RUNS}?wait=true",
                content='{"inputs": {"text": "é"}}'.encode(),
                headers={"Content-Type": given},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"]["facts"]["echoes"][0]["content"] == "echo: é"


def test_a_charset_is_checked_only_where_json_is_declared_and_read_as_http_writes_it(
    tmp_path: Path,
) -> None:
    """The charset is checked on JSON types only (a `text/plain` body with any charset is
    read as before); US-ASCII is UTF-8's; an empty `charset=` is none; a quoted string
    holding `;charset=` is no charset. Before, each was refused (415, CD307)."""
    from converge_dsl.serve._app import HttpLimits

    with (
        in_process(tmp_path / "state", HttpLimits()) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        for given in (
            "text/plain; charset=latin1",
            "application/json; charset=US-ASCII",
            "application/json; charset=",
            'application/vnd.a+json; profile="a;charset=latin1"',
        ):
            answer = http.post(
                f"{RUNS}?wait=true",
                content=b'{"inputs": {"text": "a"}}',
                headers={"Content-Type": given},
            )
            assert answer.status_code == 200, (given, answer.text)
