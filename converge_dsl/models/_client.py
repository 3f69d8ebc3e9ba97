"""`ProviderClient`: one model's HTTP client, its lifecycle, timeouts and transport failures.

One transport per model (HTTP/1.1 keep-alive, a bounded pool: a
`ShardedTransport` of `max_connections` connections), created on first use so
a model can be built outside an event loop, and re-created when a call runs on
another loop. Requests go to the transport directly, not through an
`httpx.AsyncClient`: the client's URL merging, cookie jar, auth and redirect
machinery cost a fifth of a call's CPU and none of it applies (one fixed URL,
no cookies, redirects are not followed). `post` sends one request and hands
the response to a reader; every httpx failure and timeout is translated to a
`ModelError` here, so none escapes. The connect/read/total timeouts are
measured on the event loop: they guard real sockets (their model:
docs/architecture.md §8, "Timeouts").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from converge_dsl.models._body import ACCEPT_ENCODING
from converge_dsl.models._transport import KEEPALIVE_EXPIRY_S, Certificates, ShardedTransport
from converge_dsl.models.port import ModelError, ModelErrorCode

T = TypeVar("T")

_OWNS_CONNECTION = frozenset(
    {
        "connection.connect_tcp.started",
        "http11.send_request_headers.started",
        "http2.send_request_headers.started",
    }
)
_HEADERS = (
    ("accept", "*/*"),
    ("accept-encoding", ACCEPT_ENCODING),
    ("connection", "keep-alive"),
    ("user-agent", "converge-dsl"),
    ("content-type", "application/json"),
)


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """Where to connect, and the limits of each exchange (seconds, connections)."""

    base_url: str
    timeout_s: float
    connect_timeout_s: float
    read_timeout_s: float
    max_connections: int
    certificates: Certificates = None  # the run's TLS settings (None: the process's)


class ProviderClient:
    """The HTTP side of one model: sends requests, owns the client, translates failures."""

    def __init__(
        self,
        limits: ClientLimits,
        redact: Callable[[str], str],
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`redact` masks credentials in the text of transport errors; `transport`
        replaces the default sharded pool (tests)."""
        self._limits = limits
        self._redact = redact
        self._given = transport
        self._transport: httpx.AsyncBaseTransport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handoff = asyncio.Lock()
        self._base = limits.base_url.rstrip("/")
        self._urls: dict[str, httpx.URL] = {}
        self._timeouts = httpx.Timeout(
            limits.read_timeout_s, connect=limits.connect_timeout_s, pool=limits.timeout_s
        ).as_dict()

    async def aclose(self) -> None:
        """Close the transport, if one was opened. Idempotent."""
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.aclose()

    async def post(
        self,
        path: str,
        content: bytes,
        headers: Mapping[str, str],
        *,
        where: str,
        read: Callable[[httpx.Response], Awaitable[T]],
        total_s: float | None = None,
        by_deadline: bool = False,
    ) -> T:
        """POST `content` to `path` and return `read(response)`, all within `total_s`
        (default `timeout_s`): connecting, the headers and the whole body together.

        `where` names the provider and account in error messages. `read` may
        raise `ModelError`; timeouts and httpx failures (also while `read`
        runs) become `E_TIMEOUT`, `E_PROVIDER` (unreachable, retryable) or
        `E_WIRE` (the connection broke after the answer had begun). When
        `by_deadline` says `total_s` is what is left of the run's time, running
        out is `E_BUDGET_EXHAUSTED`.
        """
        total = self._limits.timeout_s if total_s is None else total_s
        started = False
        try:
            async with asyncio.timeout(total):
                response = await self._send(self._request(path, content, headers))
                started = True
                try:
                    return await read(response)
                finally:
                    await response.aclose()
        except TimeoutError:
            if by_deadline:
                raise ModelError(
                    ModelErrorCode.BUDGET_EXHAUSTED,
                    f"the run's deadline ended the request to {where} after {total:g} s",
                    hint="raise the run's time budget (budget.max_wall_s), or check the server",
                ) from None
            raise self._failure(TimeoutError(), where, started=started, total=total) from None
        except httpx.HTTPError as exc:
            raise self._failure(exc, where, started=started, total=total) from None

    def _request(self, path: str, content: bytes, headers: Mapping[str, str]) -> httpx.Request:
        """The POST of `content` to `path`, with the client's headers and timeouts."""
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self._base + path)
        return httpx.Request(
            "POST",
            url,
            content=content,
            headers=[*_HEADERS, *headers.items()],
            extensions={"timeout": self._timeouts},
        )

    def _http(self) -> httpx.AsyncBaseTransport:
        """The transport of the running loop (a new one when the loop changed)."""
        loop = asyncio.get_running_loop()
        if self._transport is None or self._loop is not loop:
            limits = self._limits
            self._transport = self._given or ShardedTransport(
                limits.max_connections,
                KEEPALIVE_EXPIRY_S,
                secure=self._base.startswith("https:"),
                certificates=limits.certificates,
            )
            self._loop = loop
            self._handoff = asyncio.Lock()
        return self._transport

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send `request` on the transport, one connection hand-off at a time.

        httpcore may hand one idle keep-alive connection to several requests
        queued in the same pass (encode/httpcore#1110, #1111); they then wait
        in line behind each other. Holding a lock until the request owns its
        connection (headers being sent, or a new connection being opened)
        keeps concurrent calls on distinct connections; the wait for the
        answer itself is not serialised.
        """
        handoff = self._handoff
        await handoff.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                handoff.release()
                extensions.pop("trace", None)  # no more events wanted for this request

        async def trace(event: str, info: Mapping[str, Any]) -> None:
            if event in _OWNS_CONNECTION:
                release()

        extensions = request.extensions
        extensions["trace"] = trace
        try:
            response = await self._http().handle_async_request(request)
        finally:
            release()
        response.request = request
        return response

    def _failure(self, exc: Exception, where: str, *, started: bool, total: float) -> ModelError:
        """The `ModelError` for a timeout or httpx failure of an exchange with `where`
        that had `total` seconds in all."""
        limits = self._limits
        if isinstance(exc, httpx.TimeoutException):
            connect = isinstance(exc, httpx.ConnectTimeout)
            phase = "connect" if connect else "read"
            limit = limits.connect_timeout_s if connect else limits.read_timeout_s
            return ModelError(
                ModelErrorCode.TIMEOUT,
                f"{phase} timeout ({limit:g} s) talking to {where}",
                retryable=True,
                hint=f"raise {phase}_timeout_s, or check the server",
            )
        if isinstance(exc, TimeoutError):
            # A first attempt gets all of timeout_s but the instant spent before it.
            whole = limits.timeout_s - total <= 0.01 * limits.timeout_s
            within = (
                f"timeout_s ({limits.timeout_s:g} s)"
                if whole
                else f"the {total:.3g} s that timeout_s ({limits.timeout_s:g} s) left it"
            )
            return ModelError(
                ModelErrorCode.TIMEOUT,
                f"no complete answer from {where} within {within}",
                retryable=True,
                hint="raise timeout_s, or check the server's load",
            )
        detail = self._redact(str(exc)) or type(exc).__name__
        if started and isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            return ModelError(
                ModelErrorCode.WIRE,
                f"the connection to {where} broke before the answer was complete: {detail}",
                hint="the answer was discarded; retry the run",
            )
        return ModelError(
            ModelErrorCode.PROVIDER,
            f"cannot reach {where}: {detail}",
            retryable=True,
            hint="check base_url and that the server is running",
        )
