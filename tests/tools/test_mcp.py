"""The SDK adapter against real MCP servers: `mcp-server-time` from PyPI and a FastMCP
server over stdio and streamable HTTP; hangs, crashes, errors, huge answers, a planted
secret, and no process left behind."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.frontend import HttpServerSpec, StdioServerSpec
from converge_dsl.tools import McpToolServer, ToolFailure, ToolResult
from tests.loop_chain import schedule_chain

from ._servers import free_port, http_fixture, stdio_fixture, time_server

PARENT = {"PATH": os.environ["PATH"], "SECRET_TOKEN": "planted-secret", "PASSED": "given"}


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` is gone (or a zombie about to be reaped) within the bound."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in {"Z", "X"}:
            return True
        time.sleep(0.05)
    return False


def _call(server: McpToolServer, tool: str, **arguments: object) -> ToolResult:
    return asyncio.run(server.call(tool, arguments))  # type: ignore[arg-type]


def test_mcp_server_time_converts_a_fixed_time(tmp_path: Path) -> None:
    server = McpToolServer(time_server(), tmp_path, PARENT)
    try:
        info = server.start()
        assert info.name == "mcp-time"
        assert {"convert_time", "get_current_time"} <= {t.name for t in info.tools}
        result = _call(
            server,
            "convert_time",
            source_timezone="Europe/Paris",
            time="14:30",
            target_timezone="Asia/Tokyo",
        )
        answer = json.loads(result.text)
        assert not result.is_error
        assert answer["time_difference"] == "+8.0h"
        assert answer["target"]["datetime"][11:16] == "22:30"
        bad = _call(
            server, "convert_time", source_timezone="Nowhere", time="1:00", target_timezone="UTC"
        )
        assert bad.is_error
        assert "Nowhere" in bad.text
    finally:
        pid = server.child_pid
        server.close()
    assert pid is not None
    assert _gone(pid)


def test_the_fixture_over_stdio_answers_and_reports_tool_errors(tmp_path: Path) -> None:
    server = McpToolServer(stdio_fixture(), tmp_path, PARENT)
    try:
        info = server.start()
        assert [t.name for t in info.tools][:3] == ["echo", "hang", "crash"]
        echo = info.tool("echo")
        assert echo is not None
        assert echo.input_schema["required"] == ["text"]
        assert _call(server, "echo", text="hello").text == "hello"
        failed = _call(server, "fail", reason="the index is down")
        assert failed.is_error
        assert "the index is down" in failed.text
    finally:
        server.close()


def test_a_stdio_child_sees_only_the_variables_listed(tmp_path: Path) -> None:
    server = McpToolServer(stdio_fixture(env_pass=("PASSED",)), tmp_path, PARENT)
    try:
        server.start()
        assert _call(server, "getenv", name="SECRET_TOKEN").text == "<unset>"
        assert _call(server, "getenv", name="HOME").text == "<unset>"
        assert _call(server, "getenv", name="PATH").text == "<unset>"
        assert _call(server, "getenv", name="PASSED").text == "given"
    finally:
        server.close()


def test_a_result_over_the_cap_is_cut_and_marked(tmp_path: Path) -> None:
    server = McpToolServer(stdio_fixture(max_result_bytes=100), tmp_path, PARENT)
    try:
        server.start()
        result = _call(server, "echo", text="é" * 500)
    finally:
        server.close()
    assert result.cut
    assert result.size == 1014  # its structured form, {"result": "éé..."}, is the larger
    assert result.structured is None
    assert result.text.startswith("é" * 50)
    assert result.text.endswith("[result cut: 1014 bytes, over the cap of 100]")


def test_a_50_mb_answer_is_skipped_unread_and_reported(tmp_path: Path) -> None:
    server = McpToolServer(stdio_fixture(max_result_bytes=65_536), tmp_path, PARENT)
    try:
        server.start()
        result = _call(server, "big", megabytes=50)
        assert result.is_error
        assert result.cut
        assert "over the limit of" in result.text
        assert _call(server, "echo", text="still here").text == "still here"
    finally:
        server.close()


def test_a_hanging_call_times_out_and_stops_the_server(tmp_path: Path) -> None:
    server = McpToolServer(stdio_fixture(call_timeout_s=1), tmp_path, PARENT)
    server.start()
    pid = server.child_pid
    assert pid is not None
    with pytest.raises(ToolFailure) as caught:
        _call(server, "hang")
    assert caught.value.code == codes.TOOL_CALL_TIMED_OUT
    assert _gone(pid)
    with pytest.raises(ToolFailure) as again:
        _call(server, "echo", text="x")
    assert again.value.code == codes.TOOL_CALL_TIMED_OUT
    server.close()


def test_a_crashing_server_is_reported_gone(tmp_path: Path) -> None:
    server = McpToolServer(stdio_fixture(call_timeout_s=10), tmp_path, PARENT)
    server.start()
    pid = server.child_pid
    assert pid is not None
    try:
        with pytest.raises(ToolFailure) as caught:
            _call(server, "crash")
        assert caught.value.code == codes.TOOL_SERVER_GONE
    finally:
        server.close()
    assert _gone(pid)


def test_close_kills_the_whole_process_group(tmp_path: Path) -> None:
    server = McpToolServer(stdio_fixture(), tmp_path, PARENT)
    server.start()
    try:
        grandchild = int(_call(server, "spawn").text)
        assert not _gone(grandchild, within_s=0.2)
    finally:
        server.close()
    assert _gone(grandchild)


def test_what_the_child_schedules_as_it_stops_runs_before_the_loop_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipe reaching its end as the server stops is closed by callbacks scheduled one
    after the other (the pipe's, then the process transport's): a loop closed at once
    never ran them, and the transport, collected later, warned into another test."""
    from converge_dsl.tools import _stdio

    ran: list[int] = []
    stop = _stdio._stop

    async def stop_then_schedule(*args: object) -> None:
        await stop(*args)  # type: ignore[arg-type]
        schedule_chain(ran)

    monkeypatch.setattr(_stdio, "_stop", stop_then_schedule)
    server = McpToolServer(stdio_fixture(), tmp_path, PARENT)
    server.start()
    server.close()
    assert ran == [1, 2, 3]


def test_a_program_not_found_does_not_start(tmp_path: Path) -> None:
    spec = StdioServerSpec(name="nothing", command=("no-such-mcp-server",), allow=("x",))
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.code == codes.TOOL_SERVER_NOT_STARTED
    assert "'no-such-mcp-server' is not found" in caught.value.message


def test_a_server_silent_at_start_times_out_and_is_killed(tmp_path: Path) -> None:
    spec = StdioServerSpec(name="mute", command=("sleep", "60"), allow=("x",), start_timeout_s=1)
    server = McpToolServer(spec, tmp_path, PARENT)
    with pytest.raises(ToolFailure) as caught:
        server.start()
    assert caught.value.code == codes.TOOL_SERVER_NOT_STARTED
    assert "within 1 s" in caught.value.message
    assert server.child_pid is not None
    assert _gone(server.child_pid)


def test_the_fixture_over_streamable_http(tmp_path: Path) -> None:
    with http_fixture() as spec:
        server = McpToolServer(spec, tmp_path, PARENT)
        try:
            info = server.start()
            assert info.name == "fixture"
            assert _call(server, "echo", text="over http").text == "over http"
            assert _call(server, "fail", reason="no").is_error
        finally:
            server.close()


def test_an_http_server_on_a_host_not_declared_is_refused(tmp_path: Path) -> None:
    spec = HttpServerSpec(
        name="web",
        url=f"http://127.0.0.1:{free_port()}/mcp",
        hosts=("localhost",),
        allow=("echo",),
        start_timeout_s=5,
    )
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.code == codes.TOOL_HOST_REFUSED


def test_a_header_variable_not_set_does_not_start(tmp_path: Path) -> None:
    spec = HttpServerSpec(
        name="web",
        url="http://127.0.0.1:9/mcp",
        hosts=("127.0.0.1",),
        headers={"Authorization": "NO_SUCH_TOKEN"},
        allow=("echo",),
    )
    with pytest.raises(ToolFailure) as caught:
        McpToolServer(spec, tmp_path, PARENT).start()
    assert caught.value.code == codes.TOOL_SERVER_NOT_STARTED
    assert "NO_SUCH_TOKEN" in caught.value.message


def test_an_http_server_is_reached_through_the_proxies_of_the_given_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process's proxy settings are not the run's: a dead proxy set in the process
    is not used, one set in the environment the server is given is."""
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", dead)
    monkeypatch.setenv("ALL_PROXY", dead)
    with http_fixture(start_timeout_s=5) as spec:
        server = McpToolServer(spec, tmp_path, PARENT)
        try:
            assert server.start().name == "fixture"
            assert _call(server, "echo", text="direct").text == "direct"
        finally:
            server.close()
        proxied = McpToolServer(spec, tmp_path, {**PARENT, "HTTP_PROXY": dead})
        with pytest.raises(ToolFailure):
            proxied.start()
        proxied.close()
