"""The OpenAI chat-completions wire format (vLLM, llama.cpp, Ollama, hosted APIs).

System messages inside the conversation (agent contributors) stay where they
are. The API wants the `tool` messages answering an assistant's `tool_calls`
right after it, so tool messages move up past any system or user message
between them and that assistant message; nothing else is reordered.

A request with a `response_schema` asks for a schema-shaped answer as the
model's `structured_output` setting says (`json_schema`: `response_format:
{type: json_schema, json_schema: {name, schema, strict}}`; `json_object`:
`{type: json_object, schema}`, the form llama.cpp and vLLM accept; `none`:
nothing). `json_schema` wants an object at the root, so a schema for anything
else (the usual array of items) is wrapped as the one property `answer` (as
the Anthropic answer tool wraps it) and the answer unwrapped; `strict` is true
for a schema OpenAI's strict mode accepts as it is (see `strict_shaped`),
wrapped arrays of closed objects included; other servers constrain decoding
either way.

Streaming tool calls arrive as argument deltas keyed by `index`; a call is
complete when a later index starts or the choice finishes, and is handed
over at that moment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from converge_dsl.models._common import thaw_json
from converge_dsl.models._sse import SseEvent
from converge_dsl.models._wire import (
    ANSWER_TOOL,
    Answer,
    ToolNames,
    WireSettings,
    early_call,
    expect,
    list_field,
    load_json,
    object_field,
    object_schema,
    request_temperature,
    str_field,
    stream_error,
    tool_call,
    unwrap_answer,
    usage_from,
    wire_error,
)
from converge_dsl.models.port import (
    Message,
    ModelRequest,
    ModelStopReason,
    OnEarlyToolCall,
    OnIncrement,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

_STOP: Mapping[str, ModelStopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


def _stop_reason(value: str) -> ModelStopReason:
    return _STOP.get(value, "end_turn")


class OpenAIWire:
    provider = "openai"
    path = "/chat/completions"
    default_max_tokens: int | None = None

    def headers(self, api_key: str | None) -> dict[str, str]:
        return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}

    def body(
        self, req: ModelRequest, settings: WireSettings, names: ToolNames, stream: bool
    ) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if req.system:
            messages.append({"role": "system", "content": "\n\n".join(req.system)})
        messages.extend(_results_after_calls(m for r in req.messages for m in _messages(r, names)))
        body: dict[str, Any] = {"model": settings.model, "messages": messages, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        max_tokens = req.max_tokens or settings.max_tokens
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        temperature = request_temperature(req, settings)
        if temperature is not None:
            body["temperature"] = temperature
        response_format = _response_format(req, settings, names)
        if response_format is not None:
            body["response_format"] = response_format
        if req.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": names.wire(tool.name),
                        "description": tool.description,
                        "parameters": thaw_json(tool.input_schema),
                    },
                }
                for tool in req.tools
            ]
            if req.tool_choice is not None:
                body["tool_choice"] = _tool_choice(req.tool_choice, names)
        return body

    def parse(self, data: Any, names: ToolNames) -> Answer:
        choices = list_field(object_or_fail(data), "choices", "response")
        expect(bool(choices), "response has no choices")
        message = object_field(choices[0], "message", "choice")
        content = message.get("content")
        expect(content is None or isinstance(content, str), "message content is not text")
        parts: list[Part] = [TextPart(content)] if content else []
        for raw in message.get("tool_calls") or []:
            function = object_field(raw, "function", "tool call")
            name = names.local(str_field(function, "name", "tool call"))
            arguments = str_field(function, "arguments", "tool call")
            parts.append(tool_call(str_field(raw, "id", "tool call"), name, arguments))
        finish = choices[0].get("finish_reason")
        expect(isinstance(finish, str), "choice has no finish_reason")
        if content and names.answer_field is not None:
            parts[0] = TextPart(unwrap_answer(content, names))
        return Answer(
            Message("assistant", tuple(parts)),
            _stop_reason(finish),
            usage_from(data.get("usage"), "prompt_tokens", "completion_tokens"),
        )

    def assembler(
        self, names: ToolNames, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> OpenAIStream:
        return OpenAIStream(names, on_increment, on_early_call)

    def error_detail(self, data: Any) -> str | None:
        error = data.get("error") if isinstance(data, Mapping) else None
        if isinstance(error, Mapping):
            return str(error.get("message", ""))
        return str(error) if error else None


def _tool_choice(choice: str, names: ToolNames) -> str | dict[str, Any]:
    """The OpenAI `tool_choice`: `auto`, `required`, or the named function."""
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": names.wire(choice)}}


def _response_format(
    req: ModelRequest, settings: WireSettings, names: ToolNames
) -> dict[str, Any] | None:
    """The `response_format` asking for an answer shaped by the request's schema, or None.

    `json_schema` wants an object at the root: any other schema is wrapped
    (`object_schema`, closed so strict mode can take it) and the answer unwrapped."""
    if req.response_schema is None or settings.structured_output == "none":
        return None
    schema = thaw_json(req.response_schema)
    if settings.structured_output == "json_object":
        return {"type": "json_object", "schema": schema}
    if schema.get("type") != "object":
        schema = {**object_schema(schema, names), "additionalProperties": False}
    return {
        "type": "json_schema",
        "json_schema": {"name": ANSWER_TOOL, "schema": schema, "strict": strict_shaped(schema)},
    }


def strict_shaped(schema: Any) -> bool:
    """Whether OpenAI's strict mode takes `schema` as it is: every object schema in it
    closes `additionalProperties` and requires all its properties, and the root is an
    object. A strict request with any other schema is refused with 400."""
    return (
        isinstance(schema, Mapping) and schema.get("type") == "object" and _closed_objects(schema)
    )


def _closed_objects(schema: Any) -> bool:
    if isinstance(schema, list):
        return all(_closed_objects(item) for item in schema)
    if not isinstance(schema, Mapping):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        if schema.get("additionalProperties") is not False or not isinstance(properties, Mapping):
            return False
        if set(schema.get("required") or ()) != set(properties):
            return False
    return all(_closed_objects(value) for value in schema.values())


def object_or_fail(data: Any) -> Mapping[str, Any]:
    expect(isinstance(data, Mapping), "response is not a JSON object")
    return data  # type: ignore[no-any-return]


def _messages(message: Message, names: ToolNames) -> list[dict[str, Any]]:
    if message.role in ("system", "user"):
        results = [p for p in message.parts if isinstance(p, ToolResultPart)]
        out = [_tool_message(p) for p in results]
        if message.text_content or not results:
            out.append({"role": message.role, "content": message.text_content})
        return out
    if message.role == "tool":
        return [_tool_message(p) for p in message.parts if isinstance(p, ToolResultPart)]
    entry: dict[str, Any] = {"role": "assistant", "content": message.text_content or None}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": names.wire(call.name),
                    "arguments": json.dumps(thaw_json(call.input), ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    return [entry]


def _results_after_calls(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each `tool` message moved up to follow the `tool_calls` it answers."""
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []  # non-tool messages since an assistant's tool_calls
    answering = False
    for message in messages:
        if message["role"] == "assistant":
            out.extend(held)
            held.clear()
            answering = bool(message.get("tool_calls"))
            out.append(message)
        elif message["role"] == "tool" or not answering:
            out.append(message)
        else:
            held.append(message)
    return out + held


def _tool_message(part: ToolResultPart) -> dict[str, Any]:
    output = f"ERROR: {part.output}" if part.is_error else part.output
    return {"role": "tool", "tool_call_id": part.call_id, "content": output}


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class OpenAIStream:
    """Assembles a streamed chat completion."""

    def __init__(
        self, names: ToolNames, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> None:
        self._names = names
        self._on_increment = on_increment
        self._on_early_call = on_early_call
        self._text: list[str] = []
        self._pending: dict[int, _PendingCall] = {}
        self._calls: dict[int, ToolCallPart] = {}
        self._finish: str | None = None
        self._usage: Any = None

    def feed(self, event: SseEvent) -> None:
        if event.data == "[DONE]":
            return
        chunk = load_json(event.data, "stream chunk")
        expect(isinstance(chunk, Mapping), "stream chunk is not a JSON object")
        if chunk.get("error"):
            stream_error(OpenAIWire().error_detail(chunk))
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        choices = chunk.get("choices") or []
        expect(isinstance(choices, list), "stream chunk `choices` is not a list")
        for choice in choices:
            expect(isinstance(choice, Mapping), "stream choice is not an object")
            if choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: Mapping[str, Any]) -> None:
        delta = choice.get("delta") or {}
        expect(isinstance(delta, Mapping), "stream delta is not an object")
        content = delta.get("content")
        if content:
            expect(isinstance(content, str), "stream content is not text")
            self._text.append(content)
            self._on_increment(content)
        for raw in delta.get("tool_calls") or []:
            expect(isinstance(raw, Mapping), "streamed tool call is not an object")
            index = raw.get("index", 0)
            expect(isinstance(index, int), "streamed tool call has no integer index")
            expect(index not in self._calls, f"tool call {index} continued after it ended")
            for earlier in [i for i in self._pending if i != index]:
                self._complete(earlier)
            pending = self._pending.setdefault(index, _PendingCall())
            pending.id = raw.get("id") or pending.id
            function = raw.get("function") or {}
            expect(isinstance(function, Mapping), "streamed tool call function is not an object")
            pending.name = function.get("name") or pending.name
            if function.get("arguments"):
                pending.arguments.append(str(function["arguments"]))
        finish = choice.get("finish_reason")
        if finish:
            self._finish = str(finish)
            for index in list(self._pending):
                self._complete(index)

    def _complete(self, index: int) -> None:
        pending = self._pending.pop(index)
        expect(bool(pending.id and pending.name), f"streamed tool call {index} has no id or name")
        self._calls[index] = early_call(
            self._on_early_call, self._names, pending.id, pending.name, "".join(pending.arguments)
        )

    def finish(self) -> Answer:
        if self._finish is None:
            wire_error("the stream ended before the answer was complete (no finish_reason)")
        text = unwrap_answer("".join(self._text), self._names)
        parts: list[Part] = [TextPart(text)] if text else []
        parts.extend(self._calls[i] for i in sorted(self._calls))
        return Answer(
            Message("assistant", tuple(parts)),
            _stop_reason(self._finish),
            usage_from(self._usage, "prompt_tokens", "completion_tokens"),
        )
