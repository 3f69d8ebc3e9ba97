"""The Anthropic messages wire format.

Requests: the API takes system text only as a top-level `system`, and wants
`messages` to alternate user/assistant, with the `tool_result` blocks that
answer an assistant's `tool_use` first in the very next user message. Agents
put contributor messages (role `system`) inside the conversation, so the
conversion is, deterministically:
- system messages before the first user/assistant/tool message are leading
  instructions: they join the top-level `system` after `ModelRequest.system`;
- every later system message keeps its position (a transient reminder near the
  end stays near the end, where it matters) as a user text block prefixed
  `[system] `; the history sent on turn n is then a prefix of turn n+1's,
  which provider-side prompt caching relies on;
- `tool` messages become user messages; consecutive same-role messages merge
  into one, and within a user message the `tool_result` blocks move first (in
  order), then the text blocks (in order);
- empty text blocks are dropped (the API rejects them), and a message left
  with no block is skipped.

A request with a `response_schema` forces a tool: `tools` gains `{name:
"answer", description, input_schema: schema}` and `tool_choice` names it. The
input the model gives that tool is the answer: it becomes the answer's text
(canonical JSON), streamed (one increment, when its block closes) or not, and
an answer whose only tool call was the answer tool ends `end_turn`. A tool's
input is an object, so any other schema is wrapped as the input's one
property `answer`, and unwrapped from the answer.

Streamed content blocks are indexed; a `tool_use` block is complete at its
`content_block_stop` and is handed over then. The answer is complete only at
`message_stop`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from converge_dsl.engine.types import canonical_json
from converge_dsl.models._common import thaw_json
from converge_dsl.models._sse import SseEvent
from converge_dsl.models._wire import (
    ANSWER_FIELD,
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
    tool_input,
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
    Usage,
)

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_STOP: Mapping[str, ModelStopReason] = {"tool_use": "tool_use", "max_tokens": "max_tokens"}


class AnthropicWire:
    provider = "anthropic"
    path = "/v1/messages"
    default_max_tokens: int | None = DEFAULT_MAX_TOKENS

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if api_key is not None:
            headers["x-api-key"] = api_key
        return headers

    def body(
        self, req: ModelRequest, settings: WireSettings, names: ToolNames, stream: bool
    ) -> dict[str, Any]:
        system, messages = _conversation(req, names)
        body: dict[str, Any] = {
            "model": settings.model,
            "max_tokens": req.max_tokens or settings.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": messages,
        }
        if stream:
            body["stream"] = True
        if system:
            body["system"] = "\n\n".join(system)
        temperature = request_temperature(req, settings)
        if temperature is not None:
            body["temperature"] = temperature
        tools = [
            {
                "name": names.wire(tool.name),
                "description": tool.description,
                "input_schema": thaw_json(tool.input_schema),
            }
            for tool in req.tools
        ]
        if req.response_schema is not None and settings.structured_output != "none":
            answer = names.reserve_answer()
            tools.append(
                {
                    "name": answer,
                    "description": ANSWER_DESCRIPTION,
                    "input_schema": object_schema(req.response_schema, names),
                }
            )
            body["tool_choice"] = {"type": "tool", "name": answer}
        elif req.tools and req.tool_choice is not None:
            body["tool_choice"] = _tool_choice(req.tool_choice, names)
        if tools:
            body["tools"] = tools
        return body

    def parse(self, data: Any, names: ToolNames) -> Answer:
        expect(isinstance(data, Mapping), "response is not a JSON object")
        parts: list[Part] = []
        answer_text: str | None = None
        for block in list_field(data, "content", "response"):
            expect(isinstance(block, Mapping), "content block is not an object")
            kind = block.get("type")
            if kind == "text":
                parts.append(TextPart(str_field(block, "text", "text block")))
            elif kind == "tool_use":
                tool_input = block.get("input")
                expect(isinstance(tool_input, Mapping), "tool_use block has no object input")
                name = str_field(block, "name", "tool_use block")
                if name == names.answer:
                    answer_text = _answer_of(tool_input, names)
                    continue
                parts.append(
                    ToolCallPart(
                        str_field(block, "id", "tool_use block"),
                        names.local(name),
                        dict(tool_input),
                    )
                )
        stop = data.get("stop_reason")
        expect(isinstance(stop, str), "response has no stop_reason")
        usage = usage_from(data.get("usage"), "input_tokens", "output_tokens")
        return _answer(parts, answer_text, stop, usage)

    def assembler(
        self, names: ToolNames, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> AnthropicStream:
        return AnthropicStream(names, on_increment, on_early_call)

    def error_detail(self, data: Any) -> str | None:
        error = data.get("error") if isinstance(data, Mapping) else None
        if isinstance(error, Mapping):
            return f"{error.get('type', 'error')}: {error.get('message', '')}"
        return None


SYSTEM_PREFIX = "[system] "
ANSWER_DESCRIPTION = "Give your answer: its input is the whole answer, shaped by the schema."


def _tool_choice(choice: str, names: ToolNames) -> dict[str, Any]:
    """The Anthropic `tool_choice`: `auto`, `any` (for `required`), or the named tool."""
    if choice in ("auto", "none"):
        return {"type": choice}
    if choice == "required":
        return {"type": "any"}
    return {"type": "tool", "name": names.wire(choice)}


def _answer_of(tool_input: Mapping[str, Any], names: ToolNames) -> str:
    """The answer text (canonical JSON) the forced answer tool's input stands for."""
    if names.answer_field is None:
        return canonical_json(tool_input)
    expect(names.answer_field in tool_input, f"the answer tool's input has no `{ANSWER_FIELD}`")
    return canonical_json(tool_input[names.answer_field])


def _answer(parts: list[Part], answer_text: str | None, stop: str, usage: Usage | None) -> Answer:
    """The answer of `parts`, or, when the forced answer tool gave `answer_text`, that
    text (any other text is commentary and dropped) and the other tool calls; a
    `tool_use` stop with no tool call left becomes `end_turn`."""
    if answer_text is not None:
        parts = [TextPart(answer_text), *(p for p in parts if not isinstance(p, TextPart))]
    merged = _merge_text(parts)
    reason = _STOP.get(stop, "end_turn")
    if reason == "tool_use" and not any(isinstance(p, ToolCallPart) for p in merged):
        reason = "end_turn"
    return Answer(Message("assistant", merged), reason, usage)


def _conversation(req: ModelRequest, names: ToolNames) -> tuple[list[str], list[dict[str, Any]]]:
    """The top-level system blocks and the alternating `messages` (see the module doc)."""
    system = list(req.system)
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in req.messages:
        if message.role == "system" and not turns:
            system.extend(p.text for p in message.parts if isinstance(p, TextPart) and p.text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        prefix = SYSTEM_PREFIX if message.role == "system" else ""
        blocks = [_block(p, names, prefix) for p in message.parts]
        blocks = [b for b in blocks if b.get("type") != "text" or b["text"]]
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    messages = [
        {"role": role, "content": _results_first(blocks) if role == "user" else blocks}
        for role, blocks in turns
    ]
    return [s for s in system if s], messages


def _results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`tool_result` blocks first, then the rest; each group keeps its order."""
    results = [b for b in blocks if b["type"] == "tool_result"]
    return results + [b for b in blocks if b["type"] != "tool_result"]


def _block(part: Part, names: ToolNames, prefix: str = "") -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": prefix + part.text if part.text else ""}
    if isinstance(part, ToolCallPart):
        return {
            "type": "tool_use",
            "id": part.id,
            "name": names.wire(part.name),
            "input": thaw_json(part.input),
        }
    assert isinstance(part, ToolResultPart)
    return {
        "type": "tool_result",
        "tool_use_id": part.call_id,
        "content": part.output,
        "is_error": part.is_error,
    }


def _merge_text(parts: list[Part]) -> tuple[Part, ...]:
    """Adjacent text blocks become one text part; empty ones vanish (streamed or not, alike)."""
    merged: list[Part] = []
    for part in parts:
        if isinstance(part, TextPart) and not part.text:
            continue
        if isinstance(part, TextPart) and merged and isinstance(merged[-1], TextPart):
            merged[-1] = TextPart(merged[-1].text + part.text)
        else:
            merged.append(part)
    return tuple(merged)


@dataclass(slots=True)
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    done: ToolCallPart | None = None


class AnthropicStream:
    """Assembles a streamed message."""

    def __init__(
        self, names: ToolNames, on_increment: OnIncrement, on_early_call: OnEarlyToolCall
    ) -> None:
        self._names = names
        self._on_increment = on_increment
        self._on_early_call = on_early_call
        self._blocks: dict[int, _Block] = {}
        self._stop: str | None = None
        self._input_tokens = 0
        self._output_tokens = 0
        self._stopped = False

    def feed(self, event: SseEvent) -> None:
        data = load_json(event.data, "stream event")
        expect(isinstance(data, Mapping), "stream event is not a JSON object")
        kind = data.get("type", event.event)
        if kind == "message_start":
            usage = usage_from(
                object_field(data, "message", "message_start").get("usage"),
                "input_tokens",
                "output_tokens",
            )
            if usage is not None:
                self._input_tokens, self._output_tokens = usage.input_tokens, usage.output_tokens
        elif kind == "content_block_start":
            start = object_field(data, "content_block", "content_block_start")
            self._blocks[self._index(data)] = _Block(
                kind=str(start.get("type")),
                id=str(start.get("id", "")),
                name=str(start.get("name", "")),
                pieces=[str(start["text"])] if start.get("text") else [],
            )
        elif kind == "content_block_delta":
            self._delta(self._open_block(data), object_field(data, "delta", "content_block_delta"))
        elif kind == "content_block_stop":
            block = self._open_block(data)
            if block.kind == "tool_use" and block.name == self._names.answer:
                block.kind, block.pieces = "answer", [self._answer_text(block)]
                self._on_increment(block.pieces[0])
            elif block.kind == "tool_use":
                block.done = early_call(
                    self._on_early_call, self._names, block.id, block.name, "".join(block.pieces)
                )
            block.kind = f"{block.kind}:closed"
        elif kind == "message_delta":
            stop = object_field(data, "delta", "message_delta").get("stop_reason")
            self._stop = str(stop) if stop else self._stop
            self._delta_usage(data.get("usage"))
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            stream_error(AnthropicWire().error_detail(data))

    def _delta_usage(self, usage: Any) -> None:
        """`message_delta` usage: its output count is the final one; an input count there
        (some proxies send it only there) wins over message_start's when non-zero."""
        if not isinstance(usage, Mapping):
            return
        if isinstance(usage.get("output_tokens"), int):
            self._output_tokens = usage["output_tokens"]
        input_tokens = usage.get("input_tokens")
        if isinstance(input_tokens, int) and input_tokens > 0:
            self._input_tokens = input_tokens

    def _answer_text(self, block: _Block) -> str:
        """The forced answer tool's input, as canonical JSON text."""
        return _answer_of(tool_input("".join(block.pieces), block.name), self._names)

    def _index(self, data: Mapping[str, Any]) -> int:
        index = data.get("index")
        expect(isinstance(index, int), "stream event has no integer index")
        return index  # type: ignore[return-value]

    def _open_block(self, data: Mapping[str, Any]) -> _Block:
        block = self._blocks.get(self._index(data))
        expect(
            block is not None and not block.kind.endswith(":closed"),
            "stream event for a content block that is not open",
        )
        return block  # type: ignore[return-value]

    def _delta(self, block: _Block, delta: Mapping[str, Any]) -> None:
        if delta.get("type") == "text_delta":
            text = str_field(delta, "text", "text_delta")
            block.pieces.append(text)
            self._on_increment(text)
        elif delta.get("type") == "input_json_delta":
            block.pieces.append(str_field(delta, "partial_json", "input_json_delta"))

    def finish(self) -> Answer:
        if not self._stopped or self._stop is None:
            wire_error("the stream ended before the answer was complete (no message_stop)")
        expect(
            all(b.kind.endswith(":closed") for b in self._blocks.values()),
            "the stream ended with an unfinished content block",
        )
        parts: list[Part] = []
        answer_text: str | None = None
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.done is not None:
                parts.append(block.done)
            elif block.kind == "text:closed":
                parts.append(TextPart("".join(block.pieces)))
            elif block.kind == "answer:closed":
                answer_text = block.pieces[0]
        usage = usage_from({"i": self._input_tokens, "o": self._output_tokens}, "i", "o")
        return _answer(parts, answer_text, self._stop, usage)
