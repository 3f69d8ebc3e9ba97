"""What every provider wire format shares: the format protocol, tool-name mapping, shape checks.

A `WireFormat` turns a `ModelRequest` into a JSON body, and a provider's JSON
(whole, or as a stream of server-sent events) back into an `Answer`. Any
shape it does not expect is `E_WIRE`: never a partial or guessed answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Protocol

from converge_dsl._json_text import loads
from converge_dsl.models._common import token_count_problem
from converge_dsl.models._limits import MAX_JSON_DEPTH, json_depth
from converge_dsl.models._sse import SseEvent
from converge_dsl.models.port import (
    Message,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelStopReason,
    OnEarlyToolCall,
    OnIncrement,
    ToolCallPart,
    ToolSpec,
    Usage,
)

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

StructuredOutput = Literal["json_schema", "json_object", "none"]
"""How an OpenAI-compatible server is asked for a schema-shaped answer:
`json_schema` (OpenAI, vLLM, llama.cpp, Ollama), `json_object` (the schema
beside `type: json_object`, as llama.cpp and vLLM accept it), `none` (nothing)."""
STRUCTURED_OUTPUTS: tuple[StructuredOutput, ...] = ("json_schema", "json_object", "none")
ANSWER_TOOL = "answer"
ANSWER_FIELD = "answer"
"""The one property a schema-shaped answer that is not an object is wrapped in."""
"""The name of the tool a wire format forces to get a schema-shaped answer."""


@dataclass(frozen=True, slots=True)
class WireSettings:
    """Per-model request defaults a wire format needs."""

    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    structured_output: StructuredOutput = "json_schema"


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete provider answer; `usage` is None when the provider reported none."""

    message: Message
    stop_reason: ModelStopReason
    usage: Usage | None


def wire_error(problem: str) -> NoReturn:
    raise ModelError(
        ModelErrorCode.WIRE,
        problem,
        hint="the provider sent something that is not a complete answer; "
        "check base_url points at a compatible API, or retry",
    )


def stream_error(detail: str | None) -> NoReturn:
    """The provider reported an error in the middle of a stream."""
    raise ModelError(
        ModelErrorCode.PROVIDER, f"provider error in stream: {detail}", hint="retry later"
    )


def request_temperature(req: ModelRequest, settings: WireSettings) -> float | None:
    """The request's temperature, else the model's default (None: the provider's)."""
    return req.temperature if req.temperature is not None else settings.temperature


def expect(condition: bool, problem: str) -> None:
    if not condition:
        wire_error(problem)


def load_json(text: str, what: str) -> Any:
    """`text` decoded as JSON; `E_WIRE` when it is not JSON or nests deeper than
    `MAX_JSON_DEPTH` (checked before decoding, so no decoder recurses that deep)."""
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        wire_error(f"{what} nests {depth} levels deep, more than the {MAX_JSON_DEPTH} allowed")
    try:
        return loads(text)
    except (ValueError, RecursionError) as exc:
        wire_error(f"{what} is not valid JSON ({exc}): {text[:80]!r}")


def object_field(data: Any, name: str, what: str) -> Mapping[str, Any]:
    value = data.get(name) if isinstance(data, Mapping) else None
    expect(isinstance(value, Mapping), f"{what} has no object `{name}`")
    return value  # type: ignore[return-value]


def list_field(data: Mapping[str, Any], name: str, what: str) -> list[Any]:
    value = data.get(name)
    expect(isinstance(value, list), f"{what} has no list `{name}`")
    return value  # type: ignore[return-value]


def str_field(data: Mapping[str, Any], name: str, what: str) -> str:
    value = data.get(name)
    expect(isinstance(value, str), f"{what} has no string `{name}`")
    return value  # type: ignore[return-value]


def tool_input(text: str, tool: str) -> dict[str, Any]:
    """The input of a forced answer tool: a JSON object (empty text means none). Not
    JSON is `E_WIRE` here: the answer's text is read from it, not a tool run."""
    value = load_json(text, f"arguments of tool call {tool!r}") if text.strip() else {}
    expect(isinstance(value, dict), f"arguments of tool call {tool!r} are not a JSON object")
    return value


def tool_call(call_id: str, tool: str, text: str) -> ToolCallPart:
    """The tool call `call_id` of `tool` whose arguments are the JSON text `text` (empty
    text means no arguments). Arguments that are not a JSON object are the model's
    mistake, not the wire's: the call keeps no input and says what is wrong (`problem`,
    with the position of a JSON error), for the agent to answer as a soft tool error."""
    if not text.strip():
        return ToolCallPart(call_id, tool, {})
    problem = _arguments_problem(text)
    if problem is not None:
        return ToolCallPart(call_id, tool, {}, problem)
    return ToolCallPart(call_id, tool, loads(text))


def _arguments_problem(text: str) -> str | None:
    """Why the arguments `text` are not a JSON object, or None."""
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        return f"the arguments nest {depth} levels deep, more than the {MAX_JSON_DEPTH} allowed"
    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:  # a JSON error says its line and column
        return f"the arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return f"the arguments are a JSON {type(value).__name__}, not an object"
    return None


def usage_from(data: Any, input_name: str, output_name: str) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    tokens_in, tokens_out = data.get(input_name, 0), data.get(output_name, 0)
    for name, value in ((input_name, tokens_in), (output_name, tokens_out)):
        problem = token_count_problem(value, name)
        if problem is not None:
            wire_error(problem)
    return Usage(tokens_in, tokens_out)


class ToolNames:
    """Maps tool names (`context.read`) to provider-safe ones (`context_read`) and back."""

    __slots__ = ("_to_local", "_to_wire", "answer", "answer_field")

    def __init__(self, tools: Iterable[ToolSpec]) -> None:
        self._to_wire: dict[str, str] = {}
        self._to_local: dict[str, str] = {}
        self.answer: str | None = None  # the forced answer tool's wire name, once reserved
        self.answer_field: str | None = None  # the input field holding a wrapped answer
        for tool in tools:
            self.wire(tool.name)

    def reserve_answer(self) -> str:
        """A wire name for the forced answer tool, distinct from every request tool's."""
        if self.answer is None:
            candidate, suffix = ANSWER_TOOL, 2
            while candidate in self._to_local:
                candidate, suffix = f"{ANSWER_TOOL}_{suffix}", suffix + 1
            self.answer = candidate
            self._to_local[candidate] = candidate
        return self.answer

    def wire(self, name: str) -> str:
        known = self._to_wire.get(name)
        if known is not None:
            return known
        base = _UNSAFE.sub("_", name)[:60] or "tool"
        candidate, suffix = base, 2
        while candidate in self._to_local:
            candidate, suffix = f"{base}_{suffix}", suffix + 1
        self._to_wire[name] = candidate
        self._to_local[candidate] = name
        return candidate

    def local(self, wire_name: str) -> str:
        return self._to_local.get(wire_name, wire_name)


class StreamAssembler(Protocol):
    """Builds an `Answer` from stream events, reporting increments and finished tool calls."""

    def feed(self, event: SseEvent) -> None: ...

    def finish(self) -> Answer:
        """The complete answer; `E_WIRE` if the stream ended before the answer did."""
        ...


class WireFormat(Protocol):
    provider: str
    path: str
    default_max_tokens: int | None  # the answer cap sent when nothing sets one (None: none)

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def body(
        self, req: ModelRequest, settings: WireSettings, names: ToolNames, stream: bool
    ) -> dict[str, Any]: ...

    def parse(self, data: Any, names: ToolNames) -> Answer: ...

    def assembler(
        self, names: ToolNames, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> StreamAssembler: ...

    def error_detail(self, data: Any) -> str | None:
        """The provider's own error message in an error body, if it has one."""
        ...


def early_call(
    on_early_call: OnEarlyToolCall, names: ToolNames, call_id: str, wire_name: str, args: str
) -> ToolCallPart:
    """Finish one streamed tool call and hand it over at once."""
    part = tool_call(call_id, names.local(wire_name), args)
    on_early_call(part)
    return part


def object_schema(schema: Mapping[str, Any], names: ToolNames) -> dict[str, Any]:
    """`schema` as an object schema. A forced tool's input (Anthropic) and OpenAI's
    strict structured outputs want an object, so a schema for anything else (an
    array of items, say) is wrapped as the one required property `ANSWER_FIELD`,
    which `unwrap_answer` (or the answer tool's reader) takes off again; `names`
    remembers the wrapping. Its `$defs` (and `definitions`) move to the wrapper's
    root, where its local `$ref`s look."""
    from converge_dsl.models._common import thaw_json

    plain: dict[str, Any] = thaw_json(schema)
    if plain.get("type") == "object":
        return plain
    names.answer_field = ANSWER_FIELD
    hoisted: dict[str, Any] = {k: plain.pop(k) for k in ("$defs", "definitions") if k in plain}
    return {
        "type": "object",
        "properties": {ANSWER_FIELD: plain},
        "required": [ANSWER_FIELD],
        **hoisted,
    }


def unwrap_answer(text: str, names: ToolNames) -> str:
    """The answer `text` without the `object_schema` wrapper (when the request had one).

    Text that is not the wrapper (a cut or malformed answer) stays as it came, for
    the caller to report."""
    if names.answer_field is None:
        return text
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(data, dict) or set(data) != {names.answer_field}:
        return text
    return json.dumps(data[names.answer_field], ensure_ascii=False, separators=(",", ":"))
