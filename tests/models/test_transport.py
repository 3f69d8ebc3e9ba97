"""The sharded transport: requests spread over pools, and each pool's count returns to zero."""

from __future__ import annotations

import asyncio

import httpx

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
