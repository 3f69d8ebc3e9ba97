"""A request's head over a real socket: bounded in size (431) and time (408), a
malformed one refused (400), one past the server's connections refused (503), each
as the service's JSON with its code and no traceback in the server's log; bodies,
keep-alive and slow answers untouched; a uvicorn lacking a part of its protocol
the bound takes stops the start (CD448)."""

from __future__ import annotations

import json
import re
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.serve._heads import HEAD_CAP

from .conftest import DATA, Server, in_process, serve_with_token, until

TOKEN = "5ca1ab1e0ddba11c0ffee0123456789a"
RUNS = "/v1/pipelines/echo/runs"


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


def test_a_head_over_the_cap_is_431_and_never_read_whole(served: Server) -> None:
    start = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    tail = b"\r\nConnection: close\r\n\r\n"
    fits = start + b"X-Long: " + b"a" * (HEAD_CAP - len(start) - 8 - len(tail)) + tail
    assert len(fits) == HEAD_CAP
    assert exchange(served.url, fits).startswith(b"HTTP/1.1 200 OK\r\n")
    # 20 MB of one header: answered once the cap is passed, the rest dropped unread
    huge = start + b"X-Big: " + b"a" * (20 << 20) + b"\r\n\r\n"
    status, code, message, _ = refusal(exchange(served.url, huge))
    assert (status, code) == (431, "CD442")
    assert message == f"the request line and headers are over {HEAD_CAP} bytes"
    many = start + b"".join(b"X-%d: %s\r\n" % (n, b"b" * 100) for n in range(1000)) + b"\r\n"
    assert refusal(exchange(served.url, many))[:2] == (431, "CD442")
    assert "Traceback" not in "".join(served.stderr)


def test_bodies_and_keep_alive_are_not_heads(served: Server) -> None:
    """A body is counted by --body-cap, never as a head; a connection kept alive reads
    request after request, each head counted from its own start."""
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    long_value = b"a" * (HEAD_CAP - 200)
    body = json.dumps({"inputs": {"text": "x" * (500 << 10)}}).encode()
    post = (
        f"POST {RUNS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode()
        + auth
        + b"X-Long: "
        + long_value
        + b"\r\nContent-Length: %d\r\n\r\n" % len(body)
        + body
    )
    over_cap = b"x" * (2 << 20)
    refused_body = (
        f"POST {RUNS} HTTP/1.1\r\nHost: x\r\n".encode()
        + auth
        + b"Content-Length: %d\r\n\r\n" % len(over_cap)
        + over_cap
    )
    last = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Long: " + long_value + b"\r\n"
    last += b"Connection: close\r\n\r\n"
    answers = exchange(served.url, post + refused_body + post + last, seconds=30)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", answers)
    assert statuses[:2] == [b"202", b"413"], answers[:2000]
    # after a 413 answered before its body was read the connection may end (uvicorn's
    # choice); what it answers is never a 431
    assert b"CD442" not in answers


# --- the head's clock, on a server in this process with a short one ------------------


@pytest.fixture(params=["httptools", "h11"])
def quick(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A server of echo.yaml whose heads must arrive within 0.3 s (bodies: 5 s), read by
    each of uvicorn's parsers."""
    from converge_dsl.serve._app import HttpLimits
    from converge_dsl.serve._heads import protocol

    with in_process(
        tmp_path / "state",
        HttpLimits(body_s=5.0),
        http=protocol(head_s=0.3, parser=request.param),
        h11_max_incomplete_event_size=HEAD_CAP,
        timeout_keep_alive=5,
    ) as url:
        yield url


def _trickle(url: str, first: bytes, then: bytes, every: float, most: int) -> tuple[bytes, float]:
    """Send `first`, then a byte of `then` every `every` seconds (at most `most`) while
    no answer came; the answer (up to the close) and when its first byte came."""
    start = time.monotonic()
    with socket.create_connection(_address(url), timeout=10) as sock:
        sock.sendall(first)
        for byte in then[:most]:
            if select.select([sock], [], [], every)[0]:
                break
            sock.sendall(bytes([byte]))
        else:
            select.select([sock], [], [], 5)
        came = time.monotonic() - start
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
        return out, came


def test_a_head_sent_a_byte_at_a_time_is_408(quick: str) -> None:
    head = b"POST /v1/pipelines/echo/runs HTTP/1.1\r\nHost: x\r\n"
    answer, came = _trickle(quick, head, b"X-Slow: " + b"a" * 100, 0.05, 100)
    status, code, message, _ = refusal(answer)
    assert (status, code) == (408, "CD443")
    assert message == "the request line and headers did not arrive within 0.3 seconds"
    assert came < 5  # long before the trickle would have ended


def test_a_connection_that_sends_nothing_is_closed(quick: str) -> None:
    with socket.create_connection(_address(quick), timeout=5) as sock:
        assert sock.recv(100) == b""  # closed by the server, with nothing to answer


def test_the_head_clock_is_not_the_bodys_nor_keep_alives(quick: str) -> None:
    """A body slower than the head's bound (within its own), then a second request on
    the same connection after a pause longer than the head's bound: both answered."""
    body = b'{"inputs": {"text": "slow"}}'
    head = (
        b"POST /v1/pipelines/echo/runs?wait=true HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    with socket.create_connection(_address(quick), timeout=10) as sock:
        sock.sendall(head)
        for byte in body:  # 28 bytes at 0.025 s: 0.7 s, over the head's 0.3 s
            time.sleep(0.025)
            sock.sendall(bytes([byte]))
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 "), first
        time.sleep(0.5)  # idle between requests: keep-alive's 5 s, not the head's bound
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        second = b""
        while chunk := sock.recv(65536):
            second += chunk
    assert second.startswith(b"HTTP/1.1 200 "), second


def test_either_parser_refuses_as_json(quick: str) -> None:
    """The size bound and the refusal of a malformed request, whichever parser reads."""
    bad = b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n"
    assert refusal(exchange(quick, bad))[:2] == (400, "CD441")
    huge = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (4 << 20) + b"\r\n\r\n"
    assert refusal(exchange(quick, huge))[:2] == (431, "CD442")
    start = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    tail = b"\r\nConnection: close\r\n\r\n"
    fits = start + b"X-Long: " + b"a" * (HEAD_CAP - len(start) - 8 - len(tail)) + tail
    assert exchange(quick, fits).startswith(b"HTTP/1.1 200 OK\r\n")


def test_pipelined_requests_past_the_cap_in_one_read_are_each_answered(quick: str) -> None:
    """Only a head counts against the cap: 2,000 pipelined GETs (68 KB) and a POST whose
    body fills most of a read, each followed by more in the same read, are answered;
    httptools counted the requests that ended in a read against the next head (431)."""
    get = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answers = exchange(quick, get * 1999 + last, seconds=30)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answers) == [b"200"] * 2000
    body = json.dumps({"inputs": {"text": "x" * 60_000}}).encode()
    post = (
        b"POST /v1/pipelines/echo/runs HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    tail = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 6000 + b"\r\n"
    answers = exchange(quick, post + tail + b"Connection: close\r\n\r\n")
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answers) == [b"202", b"200"]


def test_a_refusal_waits_for_the_answers_before_it(
    quick: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A malformed request read behind one still being answered is refused after that
    answer, in order; the refusal was written at once, and the answer before it then
    failed in the server's log (`Cannot call write() after write_eof()`)."""
    body = b'{"inputs": {"text": "first"}}'
    post = (
        b"POST /v1/pipelines/echo/runs?wait=true HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    )
    bad = b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n"
    answers = exchange(quick, post + bad)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", answers) == [b"200", b"400"]
    assert b'"stop_reason":"converged"' in answers.replace(b" ", b"")
    assert b"CD441" in answers
    assert "Traceback" not in caplog.text
    assert "write_eof" not in caplog.text


# --- the server's connections, past its limit ----------------------------------------


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_request_past_the_connection_limit_is_503_json_with_retry_after(
    tmp_path: Path, parser: str
) -> None:
    """uvicorn's `limit_concurrency` (3 here): with two connections open, a request on a
    third is the service's JSON (CD447) with Retry-After and the connection closed; it
    was uvicorn's plain-text 'Service Unavailable'. Once one closes, a request is served."""
    from converge_dsl.serve._app import HttpLimits
    from converge_dsl.serve._heads import protocol

    health = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    closing = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with in_process(
        tmp_path / "state",
        HttpLimits(),
        http=protocol(parser=parser),
        h11_max_incomplete_event_size=HEAD_CAP,
        limit_concurrency=3,
    ) as url:
        held = [socket.create_connection(_address(url), timeout=10) for _ in range(2)]
        try:
            for sock in held:  # each answered, and kept open
                sock.sendall(health)
                assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            status, code, message, headers = refusal(exchange(url, closing))
            assert (status, code) == (503, "CD447")
            assert headers["retry-after"] == "1"
            assert message.startswith("the server is answering as many connections as it takes (3)")
        finally:
            held.pop().close()
        until(lambda: exchange(url, closing).startswith(b"HTTP/1.1 200 "), 10)
        for sock in held:
            sock.close()


# --- the uvicorn it runs on ---------------------------------------------------------


def test_pyprojects_uvicorn_bounds_are_the_supported_ones() -> None:
    import tomllib

    from converge_dsl.serve._heads import UVICORN_SUPPORTED

    from .conftest import ROOT

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    wanted = [r for extra in project["optional-dependencies"].values() for r in extra]
    uvicorns = [r for r in wanted if r.startswith("uvicorn")]
    assert uvicorns
    assert set(uvicorns) == {f"uvicorn{UVICORN_SUPPORTED}"}


@pytest.mark.parametrize("parser", ["httptools", "h11"])
def test_a_uvicorn_without_a_part_the_protocol_takes_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, parser: str
) -> None:
    """A uvicorn whose protocol lost a method this one overrides (its 400 answer would be
    uvicorn's plain text again) or an attribute it reads (the pipelined requests):
    `ServeFailed` (CD448) naming the installed uvicorn and the supported releases."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from converge_dsl.serve._errors import ServeFailed
    from converge_dsl.serve._heads import UVICORN_SUPPORTED, protocol

    base: type = HttpToolsProtocol if parser == "httptools" else H11Protocol
    protocol(parser=parser)  # the installed one has every part
    with monkeypatch.context() as patched:
        patched.delattr(base, "send_400_response")
        with pytest.raises(ServeFailed) as caught:
            protocol(parser=parser)
    assert caught.value.code == "CD448"
    message = str(caught.value)
    assert f"uvicorn {uvicorn.__version__} is not supported" in message
    assert "has no send_400_response" in message
    assert f"uvicorn{UVICORN_SUPPORTED}" in message

    made = base.__init__
    part = "pipeline" if parser == "httptools" else "conn"

    def renamed(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        delattr(self, part)

    monkeypatch.setattr(base, "__init__", renamed)
    with pytest.raises(ServeFailed, match=f"has no {part} "):
        protocol(parser=parser)

    def changed(self: Any, *args: Any, **kwargs: Any) -> None:  # a traceback, not CD448
        raise AttributeError("'Config' object has no attribute 'h11_max_incomplete_event_size'")

    monkeypatch.setattr(base, "__init__", changed)
    with pytest.raises(ServeFailed, match=r"has no __init__ as it was \(AttributeError: "):
        protocol(parser=parser)


def test_serve_stops_before_it_binds_on_such_a_uvicorn(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from converge_dsl.serve import ServeOptions
    from converge_dsl.serve._errors import ServeFailed
    from converge_dsl.serve._server import serve

    monkeypatch.delattr(HttpToolsProtocol, "on_response_complete")
    ready: list[str] = []
    with pytest.raises(ServeFailed, match="has no on_response_complete"):
        serve(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "state", port=0), ready.append)
    assert ready == []


def test_the_refusals_past_the_limit_are_logged_as_one_line_per_interval_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One line an interval (10 s, on the injected clock) says how many were refused in
    it; a quiet interval says nothing."""
    import asyncio

    from converge_dsl.clock import FakeClock
    from converge_dsl.serve._heads import RefusalLog

    clock = FakeClock()
    refusals = RefusalLog(clock)

    async def main() -> None:
        for _ in range(300):  # a burst: counted, its line 10 s after the first
            refusals.refused()
        assert caplog.records == []
        for _ in range(3):
            await asyncio.sleep(0)
        for _ in range(3):  # a quiet interval: nothing more said, nothing waited for
            await asyncio.sleep(0)
        assert len(caplog.records) == 1
        assert clock.sleeps == [10.0]
        refusals.refused()  # a later one: a line of its own
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == [
        "refused 300 connections over the concurrency limit in the last 10 s",
        "refused 1 connection over the concurrency limit in the last 10 s",
    ]
    assert clock.sleeps == [10.0, 10.0]


def test_the_refusals_counted_when_the_server_stops_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server stopped within an interval says the count so far, once: before, the
    loop's end cancelled the interval's wait and its refusals were never logged."""
    import asyncio

    from converge_dsl.clock import SystemClock
    from converge_dsl.serve._heads import RefusalLog

    refusals = RefusalLog(SystemClock())

    async def main() -> None:
        for _ in range(7):
            refusals.refused()
        await asyncio.sleep(0)  # its wait started; the loop ends within the interval

    asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == [
        "refused 7 connections over the concurrency limit in the last 10 s",
    ]
