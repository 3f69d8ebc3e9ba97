"""The sharded transport (requests spread over pools, each pool's count back to zero,
one TLS context, none for plain http) and its asyncio network backend."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from converge_dsl.models._netback import AsyncioBackend
from converge_dsl.models._transport import SHARD_SIZE, ShardedTransport
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply


def test_concurrent_requests_spread_over_shards_and_are_released() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    async def scenario(url: str) -> tuple[ShardedTransport, list[int]]:
        transport = ShardedTransport(max_connections=3 * SHARD_SIZE, keepalive_expiry=30.0)
        async with httpx.AsyncClient(base_url=url, transport=transport) as client:
            peaks: list[int] = []

            async def one() -> int:
                response = await client.post("/chat/completions", json=body)
                peaks.append(max(transport._in_flight))
                return response.status_code

            codes = await asyncio.gather(*(one() for _ in range(3 * SHARD_SIZE)))
            assert set(codes) == {200}
            return transport, peaks

    with FakeProviderServer() as server:
        server.reset(FakeReply(text="ok", delay_s=0.05))
        transport, peaks = asyncio.run(scenario(server.openai_base_url))
        ports = {seen.client_port for seen in server.requests}
    assert transport._in_flight == [0, 0, 0]
    assert max(peaks) <= SHARD_SIZE  # least-loaded choice fills the shards evenly
    assert len(ports) == 3 * SHARD_SIZE  # every concurrent request had its own connection


def test_an_http_model_never_loads_the_certificate_store(monkeypatch: pytest.MonkeyPatch) -> None:
    from converge_dsl.models import _transport

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the certificate store was loaded")

    _transport.verifying_context.cache_clear()
    monkeypatch.setattr(httpx, "create_ssl_context", refuse)
    ShardedTransport(max_connections=16, keepalive_expiry=30.0, secure=False)
    with pytest.raises(AssertionError, match="certificate store"):
        ShardedTransport(max_connections=16, keepalive_expiry=30.0, secure=True)


def test_https_models_share_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    from converge_dsl.models import _transport

    made: list[ssl.SSLContext] = []

    def create() -> ssl.SSLContext:
        made.append(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
        return made[-1]

    _transport.verifying_context.cache_clear()
    monkeypatch.setattr(httpx, "create_ssl_context", create)
    try:
        for _ in range(3):
            ShardedTransport(max_connections=3 * SHARD_SIZE, keepalive_expiry=30.0)
    finally:
        _transport.verifying_context.cache_clear()
    assert len(made) == 1


def test_the_context_of_an_http_model_trusts_no_certificate() -> None:
    from converge_dsl.models._transport import _trusts_nothing

    context = _trusts_nothing()
    assert context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    assert context.get_ca_certs() == []


# -- the asyncio network backend -----------------------------------------------------


async def _pair(handler: Any) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_backend_reads_writes_and_sees_the_server_close() -> None:
    async def scenario() -> tuple[bytes, bool, bool, bytes]:
        closed = asyncio.Event()

        async def echo_then_close(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            writer.write(await reader.read(5))
            await writer.drain()
            await closed.wait()
            writer.close()

        server, port = await _pair(echo_then_close)
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await stream.write(b"hello", timeout=5)
        echoed = await stream.read(100, timeout=5)
        idle = stream.get_extra_info("is_readable")
        closed.set()
        for _ in range(50):  # the server's close reaches us within a few loop passes
            if stream.get_extra_info("is_readable"):
                break
            await asyncio.sleep(0.01)
        readable = stream.get_extra_info("is_readable")
        end = await stream.read(100, timeout=5)
        await stream.aclose()
        server.close()
        return echoed, idle, readable, end

    echoed, idle, readable, end = asyncio.run(scenario())
    assert echoed == b"hello"
    assert not idle  # an idle keep-alive connection may be reused
    assert readable  # a closed one may not
    assert end == b""


def test_backend_unasked_bytes_make_an_idle_connection_unusable() -> None:
    async def scenario() -> bool:
        async def chatter(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"unasked")
            await writer.drain()
            await asyncio.sleep(1)

        server, port = await _pair(chatter)
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        for _ in range(50):
            if stream.get_extra_info("is_readable"):
                break
            await asyncio.sleep(0.01)
        readable = bool(stream.get_extra_info("is_readable"))
        await stream.aclose()
        server.close()
        return readable

    assert asyncio.run(scenario())


def test_backend_failures_are_httpcore_exceptions() -> None:
    async def scenario() -> list[type[BaseException]]:
        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(1)

        server, port = await _pair(silent)
        backend = AsyncioBackend()
        seen: list[type[BaseException]] = []
        stream = await backend.connect_tcp("127.0.0.1", port, timeout=5)
        try:
            await stream.read(10, timeout=0.05)
        except httpcore.ReadTimeout as exc:
            seen.append(type(exc))
        await stream.aclose()
        try:
            await stream.write(b"x", timeout=1)
        except httpcore.WriteError as exc:
            seen.append(type(exc))
        server.close()
        await server.wait_closed()
        try:
            await backend.connect_tcp("127.0.0.1", port, timeout=5)
        except httpcore.ConnectError as exc:
            seen.append(type(exc))
        return seen

    assert asyncio.run(scenario()) == [
        httpcore.ReadTimeout,
        httpcore.WriteError,
        httpcore.ConnectError,
    ]


def test_an_https_model_trusts_the_certificates_of_the_run_environment(
    tmp_path: Path, trusts_the_environments_certificates: Callable[[Any], None]
) -> None:
    """`SSL_CERT_FILE` of the environment the model is built in, not the process's."""
    import random

    from converge_dsl.clock import FakeClock
    from converge_dsl.models import build_model

    def pool_in(env: Mapping[str, str]) -> Any:
        config = {"adapter": "openai", "base_url": "https://127.0.0.1:1/v1", "model": "m"}
        model = build_model(
            "m", config, base_dir=tmp_path, env=env, clock=FakeClock(), rng=random.Random(0)
        )

        async def made() -> Any:
            return model._client._http()  # type: ignore[attr-defined]  # the model's transport

        return asyncio.run(made())

    trusts_the_environments_certificates(pool_in)
