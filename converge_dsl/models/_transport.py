"""A transport that spreads one client's requests over several connection pools.

httpcore's connection pool re-checks every pooled connection (a socket poll
each) whenever it assigns a request to a connection, so a single pool of 64
keep-alive connections costs O(64) system calls per request event: 50
concurrent calls on a warm pool spent more time scanning the pool than
waiting for the server. Shards of `SHARD_SIZE` connections keep that cost
constant while the model's one `httpx.AsyncClient` still holds up to
`max_connections` connections. Each request goes to the shard with the fewest
requests in flight (ties: the lowest index), so the spread is deterministic.
All shards of all models share one TLS context, made on first use: loading the
certificate store costs ~85 ms, which every shard of every model used to pay.
"""

from __future__ import annotations

import functools
import math
import ssl
from collections.abc import AsyncIterator, Callable

import httpx

SHARD_SIZE = 8


@functools.cache
def _tls() -> ssl.SSLContext:
    """The default verifying TLS context (httpx's), made once per process."""
    return httpx.create_ssl_context()


class _ReleasingStream(httpx.AsyncByteStream):
    """The response body; closing it marks the request done in its shard."""

    def __init__(self, inner: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._inner = inner
        self._release = release
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            if not self._released:
                self._released = True
                self._release()


class ShardedTransport(httpx.AsyncBaseTransport):
    """Up to `max_connections` connections, in pools of at most `SHARD_SIZE`."""

    def __init__(self, max_connections: int, keepalive_expiry: float) -> None:
        count = max(1, math.ceil(max_connections / SHARD_SIZE))
        per_shard = max(1, math.ceil(max_connections / count))
        limits = httpx.Limits(
            max_connections=per_shard,
            max_keepalive_connections=per_shard,
            keepalive_expiry=keepalive_expiry,
        )
        tls = httpx.create_ssl_context()
        self._shards = [httpx.AsyncHTTPTransport(limits=limits, verify=tls) for _ in range(count)]
        self._in_flight = [0] * count

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        index = min(range(len(self._shards)), key=self._in_flight.__getitem__)
        self._in_flight[index] += 1

        def release() -> None:
            self._in_flight[index] -= 1

        try:
            response = await self._shards[index].handle_async_request(request)
        except BaseException:
            release()
            raise
        stream = response.stream
        if isinstance(stream, httpx.AsyncByteStream):
            response.stream = _ReleasingStream(stream, release)
        else:  # not a streamed body: nothing stays in flight
            release()
        return response

    async def aclose(self) -> None:
        for shard in self._shards:
            await shard.aclose()
