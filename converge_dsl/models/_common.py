"""Small pure helpers shared by the adapters: token estimates, increments, request text.

`normalise_request` is the one JSON view of a `ModelRequest`: cassettes key on
its hash, scripted tool-call ids derive from it, and `request_text` is what
scripted `contains`/`regex` matches search.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from converge_dsl.engine.types import canonical_json
from converge_dsl.models.port import (
    Message,
    ModelRequest,
    ModelReturn,
    OnIncrement,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    Usage,
)

_WORDS = re.compile(r"\s*\S+\s*|\s+")


def estimate_tokens(text: str) -> int:
    """A provider-independent estimate: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


def split_increments(text: str) -> Iterator[str]:
    """Word-sized pieces whose concatenation is exactly `text`."""
    for match in _WORDS.finditer(text):
        yield match.group(0)


def emit_increments(text: str, on_increment: OnIncrement) -> None:
    for piece in split_increments(text):
        on_increment(piece)


def thaw_json(value: Any) -> Any:
    """A plain (mutable, JSON-serialisable) copy of a JSON-like value."""
    if isinstance(value, Mapping):
        return {str(k): thaw_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw_json(v) for v in value]
    return value


def part_to_json(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ToolCallPart):
        shown: dict[str, Any] = {
            "type": "tool_call",
            "id": part.id,
            "name": part.name,
            "input": thaw_json(part.input),
        }
        if part.problem is not None:  # only then: well-formed calls keep their old JSON
            shown["problem"] = part.problem
        return shown
    return {
        "type": "tool_result",
        "call_id": part.call_id,
        "output": part.output,
        "is_error": part.is_error,
    }


def part_from_json(data: Mapping[str, Any]) -> Part:
    kind = data.get("type")
    if kind == "text":
        return TextPart(str(data["text"]))
    if kind == "tool_call":
        problem = data.get("problem")
        return ToolCallPart(
            str(data["id"]),
            str(data["name"]),
            dict(data.get("input") or {}),
            None if problem is None else str(problem),
        )
    if kind == "tool_result":
        return ToolResultPart(str(data["call_id"]), str(data["output"]), bool(data.get("is_error")))
    raise ValueError(f"unknown message part type {kind!r}")


def message_to_json(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": [part_to_json(p) for p in message.parts]}


def message_from_json(data: Mapping[str, Any]) -> Message:
    role = data["role"]
    if role not in ("system", "user", "assistant", "tool"):
        raise ValueError(f"unknown role {role!r}")
    return Message(role, tuple(part_from_json(p) for p in data["parts"]))


def tool_to_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": thaw_json(tool.input_schema),
    }


def normalise_request(req: ModelRequest) -> dict[str, Any]:
    """The request as plain JSON; equal requests give equal JSON.

    `response_schema` and `tool_choice` appear only when set, so a request
    without them keeps the key it had before requests could carry them
    (recorded cassettes still replay).
    """
    normal = {
        "model": req.model,
        "system": list(req.system),
        "messages": [message_to_json(m) for m in req.messages],
        "tools": [tool_to_json(t) for t in req.tools],
        "max_tokens": req.max_tokens,
        "temperature": req.temperature,
        "confidential": req.confidential,
        "suggestor": req.suggestor,
        "turn": req.turn,
    }
    if req.response_schema is not None:
        normal["response_schema"] = thaw_json(req.response_schema)
    if req.tool_choice is not None:
        normal["tool_choice"] = req.tool_choice
    return normal


def request_key(req: ModelRequest) -> str:
    """A stable hash of the normalised request (hex sha256)."""
    return hashlib.sha256(canonical_json(normalise_request(req)).encode("utf-8")).hexdigest()


def return_to_json(result: ModelReturn) -> dict[str, Any]:
    return {
        "message": message_to_json(result.message),
        "usage": {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
        },
        "stop_reason": result.stop_reason,
        "model_id": result.model_id,
        "account": result.account,
    }


# More tokens than any model reads or writes in one call: a count above this is garbage.
MAX_TOKEN_COUNT = 10**9


def token_count_problem(value: Any, name: str) -> str | None:
    """Why `value` is not a usage count (a whole number from 0 to MAX_TOKEN_COUNT), or None.

    A negative count would be subtracted from the run's token budget.
    """
    if type(value) is not int:
        return f"usage count {name} is not an integer"
    if not 0 <= value <= MAX_TOKEN_COUNT:
        return f"usage count {name} is {value}, not between 0 and {MAX_TOKEN_COUNT}"
    return None


def _usage_from_json(data: Any) -> Usage:
    if not isinstance(data, Mapping):
        raise ValueError("usage is not an object")
    counts = [data.get(name, 0) for name in ("input_tokens", "output_tokens")]
    for name, value in zip(("input_tokens", "output_tokens"), counts, strict=True):
        problem = token_count_problem(value, name)
        if problem is not None:
            raise ValueError(problem)
    return Usage(*counts)


def return_from_json(data: Mapping[str, Any]) -> ModelReturn:
    """A recorded answer; ValueError (or KeyError/TypeError) when it is not one."""
    usage = _usage_from_json(data.get("usage") or {})
    stop = data.get("stop_reason", "end_turn")
    if stop not in ("end_turn", "tool_use", "max_tokens"):
        raise ValueError(f"unknown stop reason {stop!r}")
    account = data.get("account")
    return ModelReturn(
        message=message_from_json(data["message"]),
        usage=usage,
        stop_reason=stop,
        model_id=str(data.get("model_id", "")),
        account=None if account is None else str(account),
    )


def part_text(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, ToolResultPart):
        return part.output
    return f"{part.name} {canonical_json(thaw_json(part.input))}"


def request_text(req: ModelRequest) -> str:
    """Everything a model reads, as one text: system blocks then every message part."""
    pieces = list(req.system)
    pieces.extend(part_text(p) for m in req.messages for p in m.parts)
    return "\n".join(pieces)


def estimate_usage(req: ModelRequest, message: Message) -> Usage:
    out = "".join(part_text(p) for p in message.parts)
    return Usage(estimate_tokens(request_text(req)), estimate_tokens(out))
