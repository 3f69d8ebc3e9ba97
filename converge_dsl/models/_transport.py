"""A transport that spreads one model's requests over several connection pools.

httpcore's connection pool re-checks every pooled connection (a socket poll
each) whenever it assigns a request to a connection, so a single pool of 64
keep-alive connections costs O(64) system calls per request event: 50
concurrent calls on a warm pool spent more time scanning the pool than
waiting for the server. Shards of `SHARD_SIZE` connections keep that cost
constant while the transport as a whole still holds up to `max_connections`
connections. Each request goes to the shard with the fewest
requests in flight (ties: the lowest index), so the spread is deterministic.
All shards of all `https` models that trust the same certificates share one TLS
context, made on first use: loading the certificate store costs 15-85 ms, which
every model used to pay. The certificates are those of the run's environment
(`SSL_CERT_FILE`, else `SSL_CERT_DIR`, as httpx reads them; `Certificates`),
else of the process's.
A plain `http` model never loads it: its shards get a context that trusts no
certificate (it is never used, since every request goes to the model's one
`http` URL; were it used, it would refuse to connect rather than skip checks).
"""

from __future__ import annotations

import functools
import math
import ssl
from collections.abc import AsyncIterator, Callable, Mapping

import httpcore
import httpx

from converge_dsl.models._netback import AsyncioBackend

SHARD_SIZE = 8
KEEPALIVE_EXPIRY_S = 30.0


# The `SSL_CERT_FILE` and `SSL_CERT_DIR` of a run's environment (None when unset), or
# None for the process's.
Certificates = tuple[str | None, str | None] | None


def certificates_in(env: Mapping[str, str]) -> Certificates:
    """The certificate settings of the environment `env`."""
    return env.get("SSL_CERT_FILE") or None, env.get("SSL_CERT_DIR") or None


@functools.cache
def verifying_context(certificates: Certificates = None) -> ssl.SSLContext:
    """httpx's verifying TLS context for `certificates` (None: the process's), made once
    for each."""
    if certificates is None:
        return httpx.create_ssl_context()  # the process's environment
    cafile, capath = certificates
    if cafile is not None:
        return ssl.create_default_context(cafile=cafile)
    if capath is not None:
        return ssl.create_default_context(capath=capath)
    return httpx.create_ssl_context(trust_env=False)


@functools.cache
def _trusts_nothing() -> ssl.SSLContext:
    """A verifying TLS context with no trusted certificate: every handshake fails."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class _Shard(httpx.AsyncHTTPTransport):
    """httpx's transport over one httpcore pool on the plain asyncio backend
    (`AsyncioBackend`); httpx still translates the pool's failures."""

    def __init__(self, limits: httpx.Limits, tls: ssl.SSLContext) -> None:
        super().__init__(limits=limits, verify=tls, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )


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


class LentTransport(httpx.AsyncBaseTransport):
    """A shared pool lent to one run's model: closing it does not close the pool."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        return None


class ShardedTransport(httpx.AsyncBaseTransport):
    """Up to `max_connections` connections, in pools of at most `SHARD_SIZE`."""

    def __init__(
        self,
        max_connections: int,
        keepalive_expiry: float,
        *,
        secure: bool = True,
        certificates: Certificates = None,
    ) -> None:
        """`secure`: the requests may go to `https` URLs (the shared verifying TLS
        context of `certificates` is made, once per process); else they go to `http`
        URLs only."""
        count = max(1, math.ceil(max_connections / SHARD_SIZE))
        per_shard = max(1, math.ceil(max_connections / count))
        limits = httpx.Limits(
            max_connections=per_shard,
            max_keepalive_connections=per_shard,
            keepalive_expiry=keepalive_expiry,
        )
        tls = verifying_context(certificates) if secure else _trusts_nothing()
        self._shards = [_Shard(limits, tls) for _ in range(count)]
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
