"""`HttpModel`: the OpenAI-compatible and Anthropic adapters over one shared httpx client.

One `httpx.AsyncClient` per model (HTTP/1.1 keep-alive, bounded pool),
created on first use so a model can be built outside an event loop.
Failures are translated at this boundary; no httpx exception escapes.

Retry policy, per call:
- 401/403: the account is disabled and the next one in the roster is used;
  when none is left, `E_AUTH`.
- 429: fail over at once to the next account not yet rate-limited in this
  call; when all are, wait (`Retry-After`, else backoff) and try again.
- 5xx, 408, timeouts, connection errors: wait (exponential backoff with jitter
  from the injected rng, `Retry-After` when given) and retry, up to `retries`
  and `max_retry_wait_s` of total waiting.
- The run's budget bounds the rest: before every retry or failover attempt
  (never before the first) the injected `attempt_gate` is asked, and no retry
  may start past `deadline` (monotonic seconds on the injected clock); either
  refusal is `E_BUDGET_EXHAUSTED` naming the last provider error.
- `Retry-After` is seconds or an HTTP date; a date is read against the injected
  wall clock (`wall_time`, epoch seconds), so tests stay deterministic.
- Once a streamed increment was handed out, nothing is retried: the caller
  would see it twice. A cut stream or unexpected shape is `E_WIRE`.
Waits use the injected clock; the connect/read/total timeouts are measured by
the transport on the event loop (they guard real sockets).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from converge_dsl.clock import Clock
from converge_dsl.models._accounts import Account, AccountPool
from converge_dsl.models._anthropic import AnthropicWire
from converge_dsl.models._common import estimate_usage
from converge_dsl.models._openai import OpenAIWire
from converge_dsl.models._redact import Redactor
from converge_dsl.models._retry_after import retry_after_seconds
from converge_dsl.models._sse import SseDecoder
from converge_dsl.models._transport import ShardedTransport
from converge_dsl.models._wire import Answer, ToolNames, WireFormat, WireSettings, load_json
from converge_dsl.models.port import (
    AccountBinding,
    AccountRoster,
    ModelDefaults,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    OnEarlyToolCall,
    OnIncrement,
    ToolCallPart,
)

WIRES: Mapping[str, WireFormat] = {"openai": OpenAIWire(), "anthropic": AnthropicWire()}
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_RETRYABLE_STATUS = frozenset({408, 409, 500, 502, 503, 504, 529})
_OWNS_CONNECTION = frozenset(
    {
        "connection.connect_tcp.started",
        "http11.send_request_headers.started",
        "http2.send_request_headers.started",
    }
)


@dataclass(frozen=True, slots=True)
class HttpSettings:
    base_url: str
    model: str
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 60.0
    retries: int = 3
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    max_retry_wait_s: float = 60.0
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 20.0
    max_connections: int = 64


class HttpModel(ModelDefaults):
    """A provider model over HTTP, speaking `wire` (OpenAI chat completions or Anthropic)."""

    def __init__(
        self,
        name: str,
        wire: WireFormat,
        settings: HttpSettings,
        accounts: Sequence[Account],
        *,
        clock: Clock,
        rng: random.Random,
        transport: httpx.AsyncBaseTransport | None = None,
        attempt_gate: Callable[[], bool] | None = None,
        deadline: float | None = None,
        wall_time: Callable[[], float] = time.time,
    ) -> None:
        """`attempt_gate() -> False` means the run's budget forbids another attempt;
        `deadline` is the monotonic time (on `clock`) past which no retry starts;
        `wall_time` gives epoch seconds, to read `Retry-After` HTTP dates."""
        self.name = name
        self._wire = wire
        self._settings = settings
        self._wire_settings = WireSettings(
            settings.model, settings.max_tokens, settings.temperature
        )
        self._pool = AccountPool(wire.provider, accounts)
        self._redact = Redactor(self._pool.secrets)
        self._clock = clock
        self._rng = rng
        self._attempt_gate = attempt_gate
        self._deadline = deadline
        self._wall_time = wall_time
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._handoff = asyncio.Lock()
        self._local = (urlsplit(settings.base_url).hostname or "") in _LOCAL_HOSTS

    def __repr__(self) -> str:
        return (
            f"HttpModel(name={self.name!r}, provider={self._wire.provider!r}, "
            f"base_url={self._settings.base_url!r}, model={self._settings.model!r}, "
            f"accounts={self._pool.labels()!r})"
        )

    def redact(self, text: str) -> str:
        """`text` with this model's keys (and anything credential-shaped) masked."""
        return self._redact(text)

    def model_id(self) -> str:
        return f"{self._wire.provider}:{self._settings.model}"

    def provider_account(self) -> AccountBinding | None:
        return self._pool.binding()

    def account_roster(self) -> AccountRoster | None:
        return self._pool.roster()

    def select_account(self, label: str) -> None:
        self._pool.select(label)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def call(self, req: ModelRequest) -> ModelReturn:
        if self._settings.stream:
            return await self._run(req, _ignore, _ignore, stream=True)
        return await self._run(req, _ignore, _ignore, stream=False)

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        return await self._run(req, on_increment, _ignore, stream=True)

    async def call_speculating(
        self, req: ModelRequest, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> ModelReturn:
        return await self._run(req, on_increment, on_early_call, stream=True)

    async def _run(
        self,
        req: ModelRequest,
        on_increment: OnIncrement,
        on_early_call: OnEarlyToolCall,
        *,
        stream: bool,
    ) -> ModelReturn:
        if req.confidential and not self._local:
            raise ModelError(
                ModelErrorCode.CONFIDENTIAL,
                f"model {self.name!r} sends requests off this machine; a confidential request "
                "may only go to a local model",
                hint="use a scripted/replay model or a server on 127.0.0.1 for confidential work",
            )
        names = ToolNames(req.tools)
        body = self._wire.body(req, self._wire_settings, names, stream)
        handed_out = False

        def increment(text: str) -> None:
            nonlocal handed_out
            handed_out = True
            on_increment(text)

        def early(call: ToolCallPart) -> None:
            nonlocal handed_out
            handed_out = True
            on_early_call(call)

        attempt, waited = 0, 0.0
        rate_limited: set[str] = set()
        while True:
            account = self._pool.current()
            try:
                answer = await self._attempt(
                    account,
                    body=body,
                    names=names,
                    stream=stream,
                    on_increment=increment,
                    on_early_call=early,
                )
            except ModelError as error:
                if handed_out:
                    raise  # the caller saw increments: a retry would repeat them
                if error.code is ModelErrorCode.AUTH:
                    self._pool.disable(account.label)
                    if not self._pool.usable():
                        raise self._all_rejected(error) from None
                    self._pool.select(self._pool.current().label)
                    self._check_budget(error, 0.0)
                    continue
                if error.code is ModelErrorCode.RATE_LIMITED:
                    rate_limited.add(account.label)
                    other = self._pool.next_excluding(rate_limited)
                    if other is not None:
                        self._pool.select(other.label)
                        self._check_budget(error, 0.0)
                        continue
                    rate_limited.clear()
                    first = self._pool.next_excluding(set())
                    if first is not None:
                        self._pool.select(first.label)
                if not error.retryable or attempt >= self._settings.retries:
                    raise
                wait = self._backoff(attempt, error.retry_after)
                if waited + wait > self._settings.max_retry_wait_s:
                    raise
                self._check_budget(error, wait)
                await self._clock.sleep(wait)
                attempt, waited = attempt + 1, waited + wait
                continue
            return ModelReturn(
                message=answer.message,
                usage=answer.usage or estimate_usage(req, answer.message),
                stop_reason=answer.stop_reason,
                model_id=self.model_id(),
                account=account.label,
            )

    def _check_budget(self, last: ModelError, wait: float) -> None:
        """Raise `E_BUDGET_EXHAUSTED` unless the run allows another attempt `wait` s from now."""
        if self._attempt_gate is not None and not self._attempt_gate():
            reason = "the run's budget allows no further attempt"
            hint = "raise the run's budget, or fix the provider failure above"
        elif self._deadline is not None and self._clock.monotonic() + wait > self._deadline:
            reason = f"the run's deadline leaves no time for another attempt (next in {wait:g} s)"
            hint = "raise the run's time budget, or fix the provider failure above"
        else:
            return
        raise ModelError(
            ModelErrorCode.BUDGET_EXHAUSTED,
            f"model {self.name!r}: {reason}; last error: {last.message}",
            hint=hint,
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        ceiling = min(
            self._settings.backoff_cap_s, math.ldexp(self._settings.backoff_base_s, attempt)
        )
        return ceiling / 2 + self._rng.random() * ceiling / 2

    def _all_rejected(self, error: ModelError) -> ModelError:
        labels = ", ".join(self._pool.labels())
        return ModelError(
            ModelErrorCode.AUTH,
            f"every account of model {self.name!r} was rejected ({labels}); last: "
            f"{error.message.removeprefix('E_AUTH: ')}",
            hint="check the API keys in the environment variables named by `accounts`",
        )

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            settings = self._settings
            transport = self._transport or ShardedTransport(settings.max_connections, 30.0)
            self._client = httpx.AsyncClient(
                base_url=settings.base_url.rstrip("/"),
                transport=transport,
                timeout=httpx.Timeout(
                    settings.read_timeout_s,
                    connect=settings.connect_timeout_s,
                    pool=settings.timeout_s,
                ),
                headers={"content-type": "application/json", "user-agent": "converge-dsl"},
            )
            self._client_loop = loop
            self._handoff = asyncio.Lock()
        return self._client

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send `request` on the shared client, one connection hand-off at a time.

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

        async def trace(event: str, info: Mapping[str, Any]) -> None:
            if event in _OWNS_CONNECTION:
                release()

        request.extensions["trace"] = trace
        try:
            return await self._http().send(request, stream=True)
        finally:
            release()

    async def _attempt(
        self,
        account: Account,
        *,
        body: Mapping[str, Any],
        names: ToolNames,
        stream: bool,
        on_increment: OnIncrement,
        on_early_call: OnEarlyToolCall,
    ) -> Answer:
        where = f"{self._wire.provider} at {self._settings.base_url} (account {account.label})"
        headers = self._wire.headers(account.key)
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        started = False
        try:
            async with asyncio.timeout(self._settings.timeout_s):
                request = self._http().build_request(
                    "POST", self._wire.path, content=content, headers=headers
                )
                response = await self._send(request)
                started = True
                try:
                    if response.status_code != 200:
                        await response.aread()
                        raise self._status_error(response, where)
                    kind = response.headers.get("content-type", "")
                    if stream and kind.startswith("text/event-stream"):
                        return await self._read_stream(response, names, on_increment, on_early_call)
                    text = (await response.aread()).decode("utf-8", errors="replace")
                    answer = self._wire.parse(load_json(text, "response body"), names)
                    for call in answer.message.tool_calls:
                        on_early_call(call)
                    if stream and answer.message.text_content:
                        on_increment(answer.message.text_content)
                    return answer
                finally:
                    await response.aclose()
        except TimeoutError:
            raise ModelError(
                ModelErrorCode.TIMEOUT,
                f"no complete answer from {where} within {self._settings.timeout_s:g} s",
                retryable=True,
                hint="raise timeout_s, or check the server's load",
            ) from None
        except httpx.TimeoutException as exc:
            phase = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
            limit = (
                self._settings.connect_timeout_s
                if phase == "connect"
                else self._settings.read_timeout_s
            )
            raise ModelError(
                ModelErrorCode.TIMEOUT,
                f"{phase} timeout ({limit:g} s) talking to {where}",
                retryable=True,
                hint=f"raise {phase}_timeout_s, or check the server",
            ) from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if started:
                raise ModelError(
                    ModelErrorCode.WIRE,
                    f"the connection to {where} broke before the answer was complete: "
                    f"{self.redact(str(exc)) or type(exc).__name__}",
                    hint="the answer was discarded; retry the run",
                ) from None
            raise self._unreachable(where, exc) from None
        except httpx.HTTPError as exc:
            raise self._unreachable(where, exc) from None

    async def _read_stream(
        self,
        response: httpx.Response,
        names: ToolNames,
        on_increment: OnIncrement,
        on_early_call: OnEarlyToolCall,
    ) -> Answer:
        decoder = SseDecoder()
        assembler = self._wire.assembler(names, on_increment, on_early_call)
        async for line in response.aiter_lines():
            event = decoder.feed_line(line)
            if event is not None:
                assembler.feed(event)
        event = decoder.feed_line("")
        if event is not None:
            assembler.feed(event)
        return assembler.finish()

    def _unreachable(self, where: str, exc: Exception) -> ModelError:
        return ModelError(
            ModelErrorCode.PROVIDER,
            f"cannot reach {where}: {self.redact(str(exc)) or type(exc).__name__}",
            retryable=True,
            hint="check base_url and that the server is running",
        )

    def _status_error(self, response: httpx.Response, where: str) -> ModelError:
        status = response.status_code
        try:
            detail = self._wire.error_detail(response.json())
        except ValueError:
            detail = None
        detail = self.redact(detail or response.text[:200].strip() or response.reason_phrase)
        message = f"{where} answered HTTP {status}: {detail}"
        retry_after = retry_after_seconds(response.headers, self._wall_time)
        if status in (401, 403):
            return ModelError(
                ModelErrorCode.AUTH, message, hint="check the API key of this account"
            )
        if status == 429:
            return ModelError(
                ModelErrorCode.RATE_LIMITED,
                message,
                retryable=True,
                retry_after=retry_after,
                hint="add accounts to the roster or lower max_concurrency",
            )
        return ModelError(
            ModelErrorCode.PROVIDER,
            message,
            retryable=status in _RETRYABLE_STATUS or status >= 500,
            retry_after=retry_after,
            hint="the provider failed; retry later"
            if status >= 500
            else "the provider refused the request; check model name, base_url and limits",
        )


def _ignore(_: Any) -> None:
    return None
