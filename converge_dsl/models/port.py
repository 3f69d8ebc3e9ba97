"""The model port (docs/architecture.md §8): requests, returns, failures, and the `Model` protocol.

Adapters (scripted, openai, anthropic, replay) implement `Model`. They never
read clocks or globals themselves: clock, sleep and randomness are injected.
A streaming or speculating call owes exactly the same `ModelReturn` and the
same failures as `call`: a stream cut halfway is an error, never a shorter
answer; every early tool call equals one in the final return.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from converge_dsl._json_types import JsonSchema
from converge_dsl.errors import ModelFailure

Role = Literal["system", "user", "assistant", "tool"]
ModelStopReason = Literal["end_turn", "tool_use", "max_tokens"]
"""Why a model ended one answer (the provider's finish reason). Not the engine's
`StopReason`, which says why a whole run stopped: the two share no value."""


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call the model asked for. `problem` says why its arguments could not be
    read (not JSON, or not a JSON object: the model's mistake, answered as a soft tool
    error), with `input` then empty; None for a well-formed call."""

    id: str
    name: str
    input: Mapping[str, Any]
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    call_id: str
    output: str
    is_error: bool = False


Part = TextPart | ToolCallPart | ToolResultPart


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    parts: tuple[Part, ...]

    @classmethod
    def text(cls, role: Role, text: str) -> Message:
        return cls(role, (TextPart(text),))

    @property
    def text_content(self) -> str:
        """All text parts joined (tool parts ignored)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call; `input_schema` is a JSON Schema object."""

    name: str
    description: str
    input_schema: JsonSchema


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model call.

    `suggestor` and `turn` are routing metadata (the scripted adapter matches
    on them; providers never see them). `confidential` requests are only
    accepted by local adapters. `response_schema` (a JSON Schema, or None) is
    the shape the answer text must have as JSON: adapters ask the provider to
    constrain its answer to it (structured outputs); the caller still
    validates the decoded answer. `tool_choice` (with `tools`) says whether the
    model must call a tool: `auto` (it may), `required` (it must call one) or
    a tool's name (it must call that one); None leaves it to the provider.
    """

    model: str
    messages: tuple[Message, ...]
    system: tuple[str, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    confidential: bool = False
    suggestor: str | None = None
    turn: int | None = None
    response_schema: Mapping[str, Any] | None = None
    tool_choice: str | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )


@dataclass(frozen=True, slots=True)
class ModelReturn:
    """A complete answer. `account` is the non-secret label of the account that answered."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    stop_reason: ModelStopReason = "end_turn"
    model_id: str = ""
    account: str | None = None

    @property
    def text(self) -> str:
        return self.message.text_content

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return self.message.tool_calls


class ModelErrorCode(StrEnum):
    TIMEOUT = "E_TIMEOUT"
    RATE_LIMITED = "E_RATE_LIMITED"
    PROVIDER = "E_PROVIDER"
    AUTH = "E_AUTH"
    WIRE = "E_WIRE"
    BUDGET_EXHAUSTED = "E_BUDGET_EXHAUSTED"
    REPLAY_MISS = "E_REPLAY_MISS"
    CONFIDENTIAL = "E_CONFIDENTIAL"
    CONFIG = "E_CONFIG"
    SCRIPT = "E_SCRIPT"
    LIMIT = "E_LIMIT"
    CACHE_MISS = "E_CACHE_MISS"


class ModelError(ModelFailure):
    """A model call failed. `code` is stable; `hint` tells a human how to recover."""

    code: ModelErrorCode

    def __init__(
        self,
        code: ModelErrorCode,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint, code=code)
        self.retryable = retryable
        self.retry_after = retry_after

    def redacted(self, redact: Callable[[str], str]) -> ModelError:
        """The same failure with `redact` applied to its message and hint."""
        return ModelError(
            self.code,
            redact(self.message),
            retryable=self.retryable,
            retry_after=self.retry_after,
            hint=None if self.hint is None else redact(self.hint),
        )


@dataclass(frozen=True, slots=True)
class AccountBinding:
    """The non-secret identity of the account a request went to."""

    provider: str
    label: str


@dataclass(frozen=True, slots=True)
class AccountRoster:
    """The accounts a model may use, in priority order, and the selected one."""

    labels: tuple[str, ...]
    selected: str | None


OnIncrement = Callable[[str], None]
OnEarlyToolCall = Callable[[ToolCallPart], None]


@runtime_checkable
class Model(Protocol):
    """The model port. All calls are async and raise `ModelError` on failure."""

    def model_id(self) -> str: ...

    async def call(self, req: ModelRequest) -> ModelReturn: ...

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        """Like `call`, reporting text increments as they arrive."""
        ...

    async def call_speculating(
        self, req: ModelRequest, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> ModelReturn:
        """Like `call_streaming`, handing over each tool call once its input is complete."""
        ...

    def provider_account(self) -> AccountBinding | None: ...

    def account_roster(self) -> AccountRoster | None: ...

    def select_account(self, label: str) -> None:
        """Select an account by label; an unknown label leaves the selection unchanged."""
        ...

    async def aclose(self) -> None:
        """Release connections. Idempotent."""
        ...


class ModelDefaults:
    """Mixin giving the default streaming/speculating/account behaviour of docs/architecture.md §8.

    `call_streaming` defaults to `call` with no increments; `call_speculating`
    defaults to `call_streaming` and reports the tool calls of the final
    return (so every early call equals one in the return).
    """

    async def call(self, req: ModelRequest) -> ModelReturn:
        raise NotImplementedError

    async def call_streaming(self, req: ModelRequest, on_increment: OnIncrement) -> ModelReturn:
        return await self.call(req)

    async def call_speculating(
        self, req: ModelRequest, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> ModelReturn:
        result = await self.call_streaming(req, on_increment)
        for tool_call in result.tool_calls:
            on_early_call(tool_call)
        return result

    def provider_account(self) -> AccountBinding | None:
        return None

    def account_roster(self) -> AccountRoster | None:
        return None

    def select_account(self, label: str) -> None:
        return None

    async def aclose(self) -> None:
        return None


def cached_answer(model: Model, req: ModelRequest) -> ModelReturn | None:
    """`model.cached_answer(req)` when it has one (a cache, or a wrapper around one), else None."""
    probe = getattr(model, "cached_answer", None)
    answer = probe(req) if callable(probe) else None
    return answer if isinstance(answer, ModelReturn) else None


class ModelWrapper(ModelDefaults):
    """A model around another (`_inner`, set by the subclass): accounts and closing are the
    inner model's; a wrapper (recording, caching, tracing) overrides the calls it changes."""

    _inner: Model

    def provider_account(self) -> AccountBinding | None:
        return self._inner.provider_account()

    def account_roster(self) -> AccountRoster | None:
        return self._inner.account_roster()

    def select_account(self, label: str) -> None:
        self._inner.select_account(label)

    def cached_answer(self, req: ModelRequest) -> ModelReturn | None:
        """The answer cache's answer to `req` under this wrapper, asked before a call is
        reserved (None: a miss, or no cache under it)."""
        return cached_answer(self._inner, req)

    async def aclose(self) -> None:
        await self._inner.aclose()
