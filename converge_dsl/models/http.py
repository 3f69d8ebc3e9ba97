"""`HttpModel`: the OpenAI-compatible and Anthropic adapters over an httpx transport.

The adapter composes three parts and keeps the run's budget gate explicit:
- the HTTP side (`ProviderClient`): requests go straight to a connection pool
  (`ShardedTransport`: HTTP/1.1 keep-alive, bounded), one per model and event
  loop unless the caller lends one that several runs share (the batch runner
  does); it is created on first use, so a model can be built outside an event
  loop; timeouts and httpx failures become `ModelError` there, so no httpx
  exception escapes;
- wire decoding (`read_answer`, `status_error`): the answer, or the
  `ModelError` an HTTP status stands for;
- the retry and failover policy (`RetryPolicy`), a pure decision per failure.

Retry policy, per call:
- 401/403: the account is disabled and the next one in the roster is used;
  when none is left, `E_AUTH`.
- 429: fail over at once to the next account not yet rate-limited in this
  call; when all are, wait (`Retry-After`, else backoff) and try again.
- 5xx, 408, timeouts, connection errors: wait (exponential backoff with jitter
  from the injected rng, `Retry-After` when given) and retry, up to `retries`
  and `max_retry_wait_s` of total waiting.
- The run's budget bounds the rest: before every retry or failover attempt
  (never before the first, which the caller's reservation covers) the injected
  `attempt_gate` is asked, and no retry may start past `deadline` (monotonic
  seconds on the injected clock); either refusal is `E_BUDGET_EXHAUSTED`
  naming the last provider error. In a run the gate is the usage meter's
  `allow_attempt`: every attempt that reaches a server counts as a model call.
- `Retry-After` is seconds or an HTTP date; a date is read against the injected
  wall clock (`wall_time`, epoch seconds), so tests stay deterministic.
- Once a streamed increment was handed out to the caller, nothing is retried:
  the caller would see it twice. A plain `call` over a stream hands nothing
  out (its partial text is discarded), so a timeout after the first chunk is
  retried like one before it. A cut stream or unexpected shape is `E_WIRE`.
- Every read is capped (`limits`, see `_limits.ModelLimits`): crossing a cap
  is `E_LIMIT`, never retried.
Waits use the injected clock; the connect/read/total timeouts are measured by the transport
on the event loop (they guard real sockets). `timeout_s` bounds the whole call: each attempt
gets what is left of it (connect, headers, body: a dripping server cannot stretch it), and no
retry starts that could not finish within it; the run's `deadline` bounds it too.

Redaction by construction: every failure leaves the adapter through `_run`, which passes its
message and hint through the model's one `Redactor` (the exact keys of its accounts); so do
the increments, early tool calls and the answer it returns: no path of the adapter skips it.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from converge_dsl._urls import display_url
from converge_dsl.clock import Clock
from converge_dsl.models._accounts import Account, AccountPool
from converge_dsl.models._anthropic import AnthropicWire
from converge_dsl.models._client import ClientLimits, ProviderClient
from converge_dsl.models._common import estimate_usage
from converge_dsl.models._decode import (
    Caps,
    read_answer,
    read_error_body,
    status_error,
    undecodable,
)
from converge_dsl.models._limits import DEFAULT_LIMITS, ModelLimits
from converge_dsl.models._openai import OpenAIWire
from converge_dsl.models._redact import Redactor, redact_call, redact_message
from converge_dsl.models._retry import Action, Decision, RetryPolicy
from converge_dsl.models._transport import Certificates
from converge_dsl.models._wire import (
    Answer,
    StructuredOutput,
    ToolNames,
    WireFormat,
    WireSettings,
)
from converge_dsl.models.events import note_gate, report_attempt
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

DEFAULT_MAX_CONNECTIONS = 256
"""Connections a model's client keeps at most, unless `max_connections` says otherwise:
above any `budget.max_concurrency` most pipelines use, so the engine, not the
client, decides how many calls run at once."""
MAX_CONNECTIONS_LIMIT = 4096
WIRES: Mapping[str, WireFormat] = {"openai": OpenAIWire(), "anthropic": AnthropicWire()}
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


DEFAULT_TIMEOUT_S = 120.0
DEFAULT_CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """One HTTP model's configuration. Timeouts (docs/architecture.md §8, "Timeouts"):
    `timeout_s` bounds the whole call, every attempt and every wait between them;
    `connect_timeout_s` (at most `timeout_s`) one connection; `read_timeout_s`
    (default `timeout_s`, never a smaller hidden one) the silence between two reads."""

    base_url: str
    model: str
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout_s: float | None = None  # None: `timeout_s`
    retries: int = 3
    max_tokens: int | None = None
    temperature: float | None = None
    stream: bool = False
    max_retry_wait_s: float = 60.0
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 20.0
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    structured_output: StructuredOutput = "json_schema"
    limits: ModelLimits = DEFAULT_LIMITS
    # The certificates an https model trusts: `SSL_CERT_FILE` and `SSL_CERT_DIR` of the
    # run's environment (`certificates_in`); None: the process's.
    certificates: Certificates = None


class _Relay:
    """Passes increments and early tool calls on, remembering whether any reached the
    caller. A callback that ignores what it gets (a plain `call` over a stream) hands
    nothing out: the partial answer is discarded, so the call may still be retried."""

    __slots__ = ("_on_early_call", "_on_increment", "_redact", "handed_out", "status")

    def __init__(
        self, on_increment: OnIncrement, on_early_call: OnEarlyToolCall, redact: Redactor
    ) -> None:
        self._on_increment = on_increment
        self._on_early_call = on_early_call
        self._redact = redact
        self.handed_out = False
        self.status: int | None = None  # the HTTP status of the attempt's response, if any

    def increment(self, text: str) -> None:
        if self._on_increment is not _ignore:
            self.handed_out = True
            self._on_increment(self._redact(text))

    def early_call(self, call: ToolCallPart) -> None:
        if self._on_early_call is not _ignore:
            self.handed_out = True
            self._on_early_call(redact_call(self._redact, call))


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
            settings.model, settings.max_tokens, settings.temperature, settings.structured_output
        )
        self._pool = AccountPool(wire.provider, accounts)
        self._redact = Redactor(self._pool.secrets)
        self._caps = Caps(settings.limits, name)
        self._clock = clock
        self._policy = RetryPolicy(
            rng.random,
            retries=settings.retries,
            max_wait_s=settings.max_retry_wait_s,
            backoff_base_s=settings.backoff_base_s,
            backoff_cap_s=settings.backoff_cap_s,
        )
        self._attempt_gate = attempt_gate
        self._deadline = deadline
        self._wall_time = wall_time
        timeout = settings.timeout_s
        read = timeout if settings.read_timeout_s is None else settings.read_timeout_s
        limits = ClientLimits(
            settings.base_url,
            timeout,
            min(settings.connect_timeout_s, timeout),
            min(read, timeout),
            settings.max_connections,
            settings.certificates,
        )
        self._client = ProviderClient(limits, self._redact, transport)
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

    def cache_identity(self) -> dict[str, Any]:
        """Who answers, for the answer cache's key: the wire format, the base URL's origin
        and path (never its user info), the model and the parameters that change an answer."""
        split = urlsplit(self._settings.base_url)
        port = f":{split.port}" if split.port is not None else ""
        return {
            "wire": self._wire.provider,
            "origin": f"{split.scheme.lower()}://{(split.hostname or '').lower()}{port}",
            "path": split.path.rstrip("/"),
            "model": self._settings.model,
            "max_tokens": self.default_max_tokens(),
            "temperature": self._settings.temperature,
            "structured_output": self._settings.structured_output,
        }

    def default_max_tokens(self) -> int | None:
        """The answer cap a request that names none is sent with (None: unbounded)."""
        return self._settings.max_tokens or self._wire.default_max_tokens

    def provider_account(self) -> AccountBinding | None:
        return self._pool.binding()

    def account_roster(self) -> AccountRoster | None:
        return self._pool.roster()

    def select_account(self, label: str) -> None:
        self._pool.select(label)

    async def aclose(self) -> None:
        await self._client.aclose()

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
        """One call, its answer and its failure redacted: the only way out of the adapter."""
        try:
            answer = await self._attempts(req, on_increment, on_early_call, stream=stream)
        except ModelError as error:
            failure = error.redacted(self._redact)
        else:
            return replace(answer, message=redact_message(self._redact, answer.message))
        raise failure  # outside the handler: the unredacted error is not its context

    async def _attempts(
        self,
        req: ModelRequest,
        on_increment: OnIncrement,
        on_early_call: OnEarlyToolCall,
        *,
        stream: bool,
    ) -> ModelReturn:
        """Attempts on the selected account until one answers or the policy (or the
        budget) gives up."""
        self._check_confidential(req)
        names = ToolNames(req.tools)
        body = self._wire.body(req, self._wire_settings, names, stream)
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        relay = _Relay(on_increment, on_early_call, self._redact)
        policy = self._policy
        ends = self._clock.monotonic() + self._settings.timeout_s  # the whole call's end
        while True:
            account, started, relay.status = self._pool.current(), self._clock.monotonic(), None
            try:
                answer = await self._attempt(account, content, names, stream, relay, ends=ends)
            except ModelError as error:
                report_attempt(started, self._clock, account.label, relay.status, error.code)
                if relay.handed_out:
                    raise  # the caller saw increments: a retry would repeat them
                decision = policy.next(error, account.label, self._pool.state)
                self._follow(decision)
                if decision.action is Action.GIVE_UP:
                    raise
                if decision.action is Action.REJECTED:
                    raise self._all_rejected(error) from None
                self._check_time(error, decision.wait, ends)
                self._check_budget(error, decision.wait)
                if decision.action is Action.RETRY:
                    await self._clock.sleep(decision.wait)
                policy = decision.policy
                continue
            report_attempt(started, self._clock, account.label, relay.status, None)
            return ModelReturn(
                message=answer.message,
                usage=answer.usage or estimate_usage(req, answer.message),
                stop_reason=answer.stop_reason,
                model_id=self.model_id(),
                account=account.label,
            )

    def _check_confidential(self, req: ModelRequest) -> None:
        if req.confidential and not self._local:
            raise ModelError(
                ModelErrorCode.CONFIDENTIAL,
                f"model {self.name!r} sends requests off this machine; a confidential request "
                "may only go to a local model",
                hint="use a scripted/replay model or a server on 127.0.0.1 for confidential work",
            )

    def _follow(self, decision: Decision) -> None:
        """Make the account changes of `decision` (they outlive this call)."""
        if decision.disable is not None:
            self._pool.disable(decision.disable)
        if decision.select is not None:
            self._pool.select(decision.select)

    def _check_time(self, last: ModelError, wait: float, ends: float) -> None:
        """Raise `E_TIMEOUT` when the call's `timeout_s` leaves no time for another attempt
        `wait` s from now."""
        if self._clock.monotonic() + wait < ends:
            return
        raise ModelError(
            ModelErrorCode.TIMEOUT,
            f"model {self.name!r}: timeout_s ({self._settings.timeout_s:g} s) bounds the whole "
            f"call and leaves no time for another attempt; last error: {last.coded_message}",
            hint=f"raise models.{self.name}.timeout_s, or fix the provider failure above",
        )

    def _check_budget(self, last: ModelError, wait: float) -> None:
        """Raise `E_BUDGET_EXHAUSTED` unless the run allows another attempt `wait` s from now
        (an allowed attempt has consumed a call from the gate)."""
        # The deadline first: the gate consumes a call when it allows the attempt.
        if self._deadline is not None and self._clock.monotonic() + wait > self._deadline:
            note_gate("deadline")
            reason = f"the run's deadline leaves no time for another attempt (next in {wait:g} s)"
            hint = "raise the run's time budget, or fix the provider failure above"
        elif self._attempt_gate is not None:
            allowed = self._attempt_gate()
            note_gate("allowed" if allowed else "refused")
            if allowed:
                return
            reason = "the run's budget allows no further attempt"
            hint = "raise the run's budget, or fix the provider failure above"
        else:
            return
        raise ModelError(
            ModelErrorCode.BUDGET_EXHAUSTED,
            f"model {self.name!r}: {reason}; last error: {last.coded_message}",
            hint=hint,
        )

    def _all_rejected(self, error: ModelError) -> ModelError:
        labels = ", ".join(self._pool.labels())
        return ModelError(
            ModelErrorCode.AUTH,
            f"every account of model {self.name!r} was rejected ({labels}); last: "
            f"{error.message.removeprefix('E_AUTH: ')}",
            hint="check the API keys in the environment variables named by `accounts`",
        )

    async def _attempt(
        self,
        account: Account,
        content: bytes,
        names: ToolNames,
        stream: bool,
        relay: _Relay,
        *,
        ends: float,
    ) -> Answer:
        """One request on `account` before the call `ends` (monotonic): its answer, or the
        `ModelError` it failed with."""
        shown = display_url(self._settings.base_url)
        where = f"{self._wire.provider} at {shown} (account {account.label})"

        async def read(response: httpx.Response) -> Answer:
            relay.status = response.status_code
            if response.status_code != 200:
                body = await read_error_body(response, self._caps)
                raise status_error(
                    response,
                    body,
                    where,
                    self._wire,
                    redact=self._redact,
                    wall_time=self._wall_time,
                )
            try:
                return await read_answer(
                    response,
                    self._wire,
                    names,
                    stream=stream,
                    on_increment=relay.increment,
                    on_early_call=relay.early_call,
                    caps=self._caps,
                )
            except (RecursionError, ValueError, TypeError, LookupError) as exc:
                raise undecodable(exc, where) from None

        headers = self._wire.headers(account.key)
        total, by_deadline = self._attempt_time(ends)
        return await self._client.post(
            self._wire.path,
            content,
            headers,
            where=where,
            read=read,
            total_s=total,
            by_deadline=by_deadline,
        )

    def _attempt_time(self, ends: float) -> tuple[float, bool]:
        """Seconds this attempt may take in all (what is left of the call's `timeout_s`),
        and whether the run's deadline (not `timeout_s`) sets them; `E_BUDGET_EXHAUSTED`
        when the deadline has passed."""
        total = max(0.0, ends - self._clock.monotonic())
        if self._deadline is None:
            return total, False
        left = self._deadline - self._clock.monotonic()
        if left <= 0:
            raise ModelError(
                ModelErrorCode.BUDGET_EXHAUSTED,
                f"model {self.name!r}: the run's deadline has passed; no request was sent",
                hint="raise the run's time budget (budget.max_wall_s)",
            )
        return (left, True) if left < total else (total, False)


def _ignore(_: Any) -> None:
    return None
