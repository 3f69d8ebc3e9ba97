"""Connections of an HTTP model: `max_connections` (schema, factory, default), and a
client that lets 200 calls be in flight at once.

The server here runs on the test's own event loop and holds every request until
it has seen as many as the test expects at once: if the client queued any of
them behind a connection limit, the barrier would never open and the test
would time out instead of answering.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.frontend import load_text, schema_diagnostics
from converge_dsl.models import (
    Message,
    Model,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    build_model,
)
from converge_dsl.models.http import DEFAULT_MAX_CONNECTIONS, MAX_CONNECTIONS_LIMIT, HttpModel

_ANSWER = json.dumps(
    {
        "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
).encode()
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    + f"content-length: {len(_ANSWER)}\r\n\r\n".encode()
    + _ANSWER
)


class _Server:
    """Answers chat requests on 127.0.0.1 once `release` says so; counts connections
    and requests in flight."""

    def __init__(self, release: Callable[[int], Awaitable[None]]) -> None:
        self.release = release
        self.connections = 0
        self.in_flight = 0
        self.peak = 0
        self.url = ""

    async def start(self) -> asyncio.Server:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=1024)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        return server

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                await self.release(self.in_flight)
                self.in_flight -= 1
                writer.write(_RESPONSE)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _model(url: str, **extra: Any) -> Model:
    config = {"adapter": "openai", "base_url": url, "model": "m", "retries": 0, **extra}
    return build_model(
        "m", config, base_dir=Path("."), env={}, clock=FakeClock(), rng=random.Random(1)
    )


def _request(i: int) -> ModelRequest:
    return ModelRequest("m", (Message.text("user", f"call {i}"),))


async def _calls(server: _Server, count: int, **extra: Any) -> list[str]:
    listening = await server.start()
    model = _model(server.url, **extra)
    try:
        async with asyncio.timeout(20):
            answers = await asyncio.gather(*(model.call(_request(i)) for i in range(count)))
    finally:
        await model.aclose()
        listening.close()
    return [answer.message.text_content for answer in answers]


def test_200_calls_are_in_flight_at_once_with_the_default_pool() -> None:
    count = 200
    everyone = asyncio.Event()

    async def barrier(in_flight: int) -> None:
        if in_flight >= count:
            everyone.set()
        await everyone.wait()

    server = _Server(barrier)
    assert asyncio.run(_calls(server, count)) == ["ok"] * count
    assert server.peak == count
    assert server.connections == count


def test_max_connections_bounds_the_connections_and_the_calls_still_finish() -> None:
    async def pause(in_flight: int) -> None:
        await asyncio.sleep(0.01)

    server = _Server(pause)
    assert asyncio.run(_calls(server, 30, max_connections=4)) == ["ok"] * 30
    assert server.peak <= 4
    assert server.connections <= 4


def test_the_default_and_a_configured_max_connections_reach_the_settings() -> None:
    default = _model("http://127.0.0.1:9/v1")
    configured = _model("http://127.0.0.1:9/v1", max_connections=512)
    assert isinstance(default, HttpModel)
    assert isinstance(configured, HttpModel)
    assert default._settings.max_connections == DEFAULT_MAX_CONNECTIONS == 256
    assert configured._settings.max_connections == 512


@pytest.mark.parametrize("value", [0, -1, MAX_CONNECTIONS_LIMIT + 1, 2.5, "64", True])
def test_a_bad_max_connections_is_refused_by_factory_and_schema(value: Any) -> None:
    with pytest.raises(ModelError) as caught:
        _model("http://127.0.0.1:9/v1", max_connections=value)
    assert caught.value.code is ModelErrorCode.CONFIG
    assert "max_connections" in str(caught.value)
    assert "models.m.max_connections" in (caught.value.hint or "")
    text = (
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\nmodels:\n"
        f"  m: {{adapter: openai, base_url: 'http://x', model: m, "
        f"max_connections: {json.dumps(value)}}}\nsuggestors: []\n"
    )
    (problem,) = schema_diagnostics(load_text(text, "p.yaml"), "pipeline.v1.json")
    assert "max_connections" in problem.message


@pytest.mark.parametrize("adapter", ["openai", "anthropic"])
def test_max_connections_passes_the_schema_for_both_http_adapters(adapter: str) -> None:
    text = (
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\nmodels:\n"
        f"  m: {{adapter: {adapter}, base_url: 'http://x', model: m, max_connections: 1000}}\n"
        "suggestors: []\n"
    )
    assert schema_diagnostics(load_text(text, "p.yaml"), "pipeline.v1.json") == []
