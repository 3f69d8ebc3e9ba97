"""The OpenTelemetry GenAI semantic conventions for one model call: its span's attributes.

`ModelFacts` is what the runtime knows of a model from its declaration
(provider, requested model, adapter, server); `call_started`,
`call_attempt` and `call_finished` turn the model-call events
(`converge_dsl.models.events`) into `gen_ai.*` (and `server.*`, `http.*`,
`error.type`, `converge_dsl.model.*`) attributes; `tool_call(event)` does the
same for an MCP tool call (`execute_tool`, `gen_ai.tool.*`, `error.type`, its
server) and `tool_content(event, redact)` gives its arguments and result (opt-in);
`content(request, answer, redact)` gives the opt-in content attributes
(`gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`,
JSON), every string of them first through `redact`. Nothing here sees a prompt or an answer but
`content`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from converge_dsl._record import Record
from converge_dsl.models.port import (
    Message,
    ModelRequest,
    ModelReturn,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

Attributes = dict[str, Any]
# Our model stop reasons as the GenAI conventions' finish reasons.
FINISH_REASONS = {"end_turn": "stop", "tool_use": "tool_call", "max_tokens": "length"}
# A tool result that is a failure of the server, not of the tool, starts with its code.
_TOOL_FAILURE = re.compile(r"^(CD\d{3}): ")


class ModelFacts(Record):
    """What the spans of one model's calls say about it (from its declaration)."""

    _fields = ("provider", "request_model", "adapter", "address", "port", "request")
    __slots__ = _fields

    def __init__(
        self,
        provider: str,
        request_model: str,
        adapter: str,
        *,
        address: str | None = None,
        port: int | None = None,
        request: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        self.provider = provider
        self.request_model = request_model
        self.adapter = adapter
        self.address = address
        self.port = port
        self.request = request

    @property
    def span_name(self) -> str:
        """`{gen_ai.operation.name} {gen_ai.request.model}`."""
        return f"chat {self.request_model}"


def call_started(facts: ModelFacts, event: Any) -> Attributes:
    """The attributes a model call's span starts with (a `model_call_started` event)."""
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": facts.provider,
        "gen_ai.system": facts.provider,
        "gen_ai.request.model": facts.request_model,
        "converge_dsl.model.name": event.model,
        "converge_dsl.model.call": event.call,
    }
    if facts.adapter:
        attributes["converge_dsl.model.adapter"] = facts.adapter
    if facts.address is not None:
        attributes["server.address"] = facts.address
    if facts.port is not None:
        attributes["server.port"] = facts.port
    attributes |= {f"gen_ai.request.{name}": value for name, value in facts.request}
    if event.suggestor is not None:
        attributes["converge_dsl.suggestor.name"] = event.suggestor
    if event.turn is not None:
        attributes["converge_dsl.agent.turn"] = event.turn
    return attributes


def call_attempt(event: Any) -> Attributes:
    """The attributes of a `model_call_attempt` span event."""
    attributes: Attributes = {"converge_dsl.model.attempt": event.attempt}
    if event.status_code is not None:
        attributes["http.response.status_code"] = event.status_code
    if event.error is not None:
        attributes["error.type"] = event.error
    if event.account is not None:
        attributes["converge_dsl.model.account"] = event.account
    return attributes


def call_finished(facts: ModelFacts | None, event: Any) -> Attributes:
    """The attributes a `model_call_finished` event adds (`error.type` when it failed)."""
    attributes: Attributes = {
        "gen_ai.usage.input_tokens": event.input_tokens,
        "gen_ai.usage.output_tokens": event.output_tokens,
        "converge_dsl.model.attempts": event.attempts,
    }
    if event.model_id:
        prefix = f"{facts.provider}:" if facts is not None else ""
        attributes["gen_ai.response.model"] = event.model_id.removeprefix(prefix)
    if event.stop_reason is not None:
        reason = FINISH_REASONS.get(event.stop_reason, event.stop_reason)
        attributes["gen_ai.response.finish_reasons"] = [reason]
    if event.status_code is not None:
        attributes["http.response.status_code"] = event.status_code
    if event.account is not None:
        attributes["converge_dsl.model.account"] = event.account
    if event.status != "ok":
        attributes["error.type"] = event.status
    if getattr(event, "cached", None):
        attributes["converge_dsl.model.cached"] = True  # answered from the answer cache
    return attributes


def content(
    request: ModelRequest, answer: ModelReturn | None, redact: Callable[[str], str]
) -> Attributes:
    """The opt-in content attributes of one call, every string passed through `redact`."""
    attributes: Attributes = {}
    if request.system:
        parts = [{"type": "text", "content": redact(text)} for text in request.system]
        attributes["gen_ai.system_instructions"] = _json(parts)
    messages = [_message_json(m, redact) for m in request.messages]
    attributes["gen_ai.input.messages"] = _json(messages)
    if answer is not None:
        output = _message_json(answer.message, redact)
        output["finish_reason"] = FINISH_REASONS.get(answer.stop_reason, answer.stop_reason)
        attributes["gen_ai.output.messages"] = _json([output])
    return attributes


def _message_json(message: Message, redact: Callable[[str], str]) -> dict[str, Any]:
    return {"role": message.role, "parts": [_part_json(p, redact) for p in message.parts]}


def _part_json(
    part: TextPart | ToolCallPart | ToolResultPart, redact: Callable[[str], str]
) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "content": redact(part.text)}
    if isinstance(part, ToolCallPart):
        return {
            "type": "tool_call",
            "id": redact(part.id),
            "name": redact(part.name),
            "arguments": _redact_json(redact, dict(part.input)),
        }
    return {
        "type": "tool_call_response",
        "id": redact(part.call_id),
        "response": redact(part.output),
    }


def _redact_json(redact: Callable[[str], str], value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {redact(str(k)): _redact_json(redact, v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_redact_json(redact, v) for v in value]
    return value


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_name(event: Any) -> str:
    """The name the caller calls an MCP tool by (`mcp:SERVER/TOOL`)."""
    return f"mcp:{event.server}/{event.tool}"


def tool_call(event: Any) -> Attributes:
    """The attributes of an MCP tool call's span (an `mcp_tool_called` event):
    `error.type` is the server's failure code (CD96x) or `tool_error`."""
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool_name(event),
        "gen_ai.tool.type": "extension",
        "converge_dsl.tool.server": event.server,
        "converge_dsl.tool.tool": event.tool,
        "converge_dsl.suggestor.name": event.suggestor,
        "converge_dsl.cycle.number": event.cycle,
    }
    if event.call_id is not None:
        attributes["gen_ai.tool.call.id"] = event.call_id
    if event.is_error:
        failure = _TOOL_FAILURE.match(event.output)
        attributes["error.type"] = failure.group(1) if failure else "tool_error"
    return attributes


def tool_content(event: Any, redact: Callable[[str], str]) -> Attributes:
    """The opt-in content of a tool call: its arguments (JSON) and its result, redacted."""
    return {
        "gen_ai.tool.call.arguments": _json(_redact_json(redact, dict(event.arguments))),
        "gen_ai.tool.call.result": redact(event.output),
    }
