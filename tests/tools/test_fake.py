"""The fake adapter answers from functions, records its calls and fails as a server does."""

from __future__ import annotations

import asyncio

import pytest

from converge_dsl import codes
from converge_dsl.tools import FakeTool, FakeToolServer, ToolFailure, ToolResult


def _server(**options: object) -> FakeToolServer:
    tools = [
        FakeTool("echo", lambda a: str(a["text"]), {"type": "object", "required": ["text"]}),
        FakeTool("fail", lambda a: ToolResult("no", is_error=True)),
    ]
    return FakeToolServer("fake", tools, **options)  # type: ignore[arg-type]


def test_it_lists_answers_and_records() -> None:
    server = _server(max_result_bytes=4)
    info = server.start()
    assert [t.name for t in info.tools] == ["echo", "fail"]
    assert asyncio.run(server.call("echo", {"text": "hi"})).text == "hi"
    assert asyncio.run(server.call("fail", {})).is_error
    assert asyncio.run(server.call("nope", {})).is_error
    assert asyncio.run(server.call("echo", {"text": "too long"})).cut
    assert [name for name, _ in server.calls] == ["echo", "fail", "nope", "echo"]


def test_it_fails_as_a_server_does() -> None:
    with pytest.raises(ToolFailure) as caught:
        _server(fail_start="no such program").start()
    assert caught.value.code == codes.TOOL_SERVER_NOT_STARTED
    server = _server()
    server.start()
    server.close()
    with pytest.raises(ToolFailure) as gone:
        asyncio.run(server.call("echo", {"text": "x"}))
    assert gone.value.code == codes.TOOL_SERVER_GONE
