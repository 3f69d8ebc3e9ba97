"""Trace events an agent emits into the run's event sink.

Each event is a frozen pydantic model with a `type` literal, so the runtime
writes it as one JSONL line of the trace. `SpanCleared` carries the cleared
turns in full: `converge-dsl trace expand TRACE REDUCTION_ID` prints them back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from converge_dsl.models.port import Message, TextPart, ToolCallPart, ToolResultPart

EventSink = Callable[[BaseModel], None]

# Why a cleared span kept its stub (SummaryFallback.reason).
FALLBACK_REASONS: tuple[str, ...] = (
    "budget_exhausted",  # max_calls used up
    "run_budget_exhausted",  # the pipeline's model budget is spent
    "over_budget",  # span longer than max_input_chars
    "below_floor",  # span shorter than expected_summary_bytes x cost_floor_multiple
    "timeout",
    "error",
    "blank",
    "not_shorter",  # the summary would not shrink the span
)


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    suggestor: str
    cycle: int


class AgentTurnStarted(_Event):
    type: Literal["agent_turn_started"] = "agent_turn_started"
    turn: int
    estimated_tokens: int
    context_window: int


class ContributorFired(_Event):
    type: Literal["agent_contributor_fired"] = "agent_contributor_fired"
    turn: int
    contributor: str
    kind: str
    role: str
    persist: bool
    chars: int
    text: str = Field(default="", description="the message's text, cut to its first 400 characters")


class ToolCalled(_Event):
    type: Literal["agent_tool_called"] = "agent_tool_called"
    turn: int
    tool: str
    is_error: bool


class _Line(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPartLine(_Line):
    """A text part of a cleared message, as the trace holds it."""

    type: Literal["text"]
    text: str


class ToolCallPartLine(_Line):
    """A tool call of a cleared message, as the trace holds it."""

    type: Literal["tool_call"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultPartLine(_Line):
    """A tool result of a cleared message, as the trace holds it."""

    type: Literal["tool_result"]
    call_id: str
    output: str
    is_error: bool


PartLine = Annotated[
    TextPartLine | ToolCallPartLine | ToolResultPartLine, Field(discriminator="type")
]


class MessageLine(_Line):
    role: str
    parts: list[PartLine]


class ClearedTurn(_Line):
    turn: int
    messages: list[MessageLine]


class SpanCleared(_Event):
    """The turns a compaction removed, verbatim, for recovery (`trace expand` reads it back)."""

    type: Literal["agent_span_cleared"] = "agent_span_cleared"
    reduction_id: str
    first_turn: int
    last_turn: int
    turns: list[ClearedTurn]


class SummaryTaken(_Event):
    type: Literal["agent_summary_taken"] = "agent_summary_taken"
    reduction_id: str
    model_id: str
    prompt_version: str
    sha256: str
    chars: int


class SummaryFallback(_Event):
    type: Literal["agent_summary_fallback"] = "agent_summary_fallback"
    reduction_id: str
    reason: str
    detail: str = ""


class Compaction(_Event):
    type: Literal["agent_compaction"] = "agent_compaction"
    turn: int
    level: Literal["normal", "emergency"]
    reduction_id: str
    first_turn: int
    last_turn: int
    tokens_before: int
    tokens_after: int
    replacement: Literal["stub", "summary"]


class AgentFinished(_Event):
    type: Literal["agent_finished"] = "agent_finished"
    status: str
    turns: int
    proposals: int


def part_to_json(part: TextPart | ToolCallPart | ToolResultPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_call", "id": part.id, "name": part.name, "input": dict(part.input)}
    return {
        "type": "tool_result",
        "call_id": part.call_id,
        "output": part.output,
        "is_error": part.is_error,
    }


def messages_to_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [{"role": m.role, "parts": [part_to_json(p) for p in m.parts]} for m in messages]
