"""The trace event of an MCP tool call, written by the run's tools for every caller.

A frozen pydantic model with a `type` literal, so the runtime writes it as one
JSONL line of the trace (`schemas/trace-event.v1.json`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from converge_dsl.engine.events import Timing


class McpToolCalled(BaseModel):
    """A call of an MCP tool (`mcp:SERVER/TOOL`) by an agent or a tool suggestor: its
    arguments and its result as the caller saw it (capped and redacted), whether an
    error."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    type: Literal["mcp_tool_called"] = "mcp_tool_called"
    timing: Timing | None = Field(
        default=None, description="when the call ended (`at`) and how long it took"
    )
    suggestor: str
    cycle: int
    server: str
    tool: str
    arguments: dict[str, Any]
    output: str = Field(description="the result's text, cut to its first 2,000 characters")
    is_error: bool
    call_id: str | None = Field(
        default=None, description="the id of the model's tool call (an agent's), else null"
    )
