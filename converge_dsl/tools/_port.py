"""The tools port: what a pipeline needs of an MCP server, whatever reaches it.

A `ToolServer` is started once (`start() -> ServerInfo`: its name, version and
tools as `tools/list` gives them), answers `call(tool, arguments)` with a
`ToolResult`, and is stopped with `close()` (idempotent; for a child process,
its whole process group). Failures of the server itself (it cannot start, a
call times out, it goes away) raise `ToolFailure` with a stable code; a tool
that answers with an error is a `ToolResult` with `is_error`, not a failure.
Results are capped (`cap_result`) at the server's `max_result_bytes`, marked as
cut. The limits a pipeline leaves out have their defaults here
(`ServerLimits.of`). Adapters: `McpToolServer` (the `mcp` SDK) and
`FakeToolServer` (tools answered by Python functions, for tests).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from converge_dsl._json_text import surrogate_problem
from converge_dsl._json_types import JsonObject, JsonSchema, JsonValue
from converge_dsl.errors import ConvergeError
from converge_dsl.frontend import ToolServerSpec

DEFAULT_START_TIMEOUT_S = 10.0
DEFAULT_CALL_TIMEOUT_S = 30.0
DEFAULT_MAX_RESULT_BYTES = 65_536
# The longest a timeout waits: the schema's `maximum` of a tool server's timeouts, held
# here too for a spec built without validate (threading refuses a wait past its
# TIMEOUT_MAX, about 292 years, with an OverflowError, and no run lasts a year).
LONGEST_WAIT_S = 365 * 24 * 3600.0


class ToolFailure(ConvergeError):
    """A tool server failed: it did not start, a call timed out, or it went away.

    `code` is one of the CD96x codes (docs/errors.md); `server` names it.
    """

    code: str

    def __init__(self, code: str, server: str, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint, code=code)
        self.server = server


@dataclass(frozen=True)
class ServerLimits:
    """A server's timeouts (seconds) and the cap on one result's bytes."""

    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES

    @classmethod
    def of(cls, spec: ToolServerSpec) -> ServerLimits:
        """The limits `spec` writes, the defaults for the others; a timeout at most
        `LONGEST_WAIT_S`."""
        return cls(
            start_timeout_s=min(
                float(spec.start_timeout_s or DEFAULT_START_TIMEOUT_S), LONGEST_WAIT_S
            ),
            call_timeout_s=min(
                float(spec.call_timeout_s or DEFAULT_CALL_TIMEOUT_S), LONGEST_WAIT_S
            ),
            max_result_bytes=spec.max_result_bytes or DEFAULT_MAX_RESULT_BYTES,
        )


@dataclass(frozen=True)
class ToolInfo:
    """One tool of a server's `tools/list`: its name, description and input schema."""

    name: str
    description: str
    input_schema: JsonSchema


@dataclass(frozen=True)
class ServerInfo:
    """What a started server says of itself: name, version and tools (in its order)."""

    name: str
    version: str
    tools: tuple[ToolInfo, ...]

    def tool(self, name: str) -> ToolInfo | None:
        return next((t for t in self.tools if t.name == name), None)

    def digest(self) -> str:
        """A digest of the tool list (names and input schemas, canonical JSON)."""
        listed = sorted([t.name, t.input_schema] for t in self.tools)
        text = json.dumps(listed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer: its text parts joined (`text`), its structured content (None when
    it gave none or it was over the cap), whether the tool reported an error, and, when
    the answer was over the cap, `cut` with the answer's size in bytes. `cached`: it was
    answered from the answer cache, no server was called."""

    text: str
    structured: JsonValue = None
    is_error: bool = False
    cut: bool = False
    size: int = 0
    cached: bool = False


class ToolServer(Protocol):
    """The tools port (see the module docstring)."""

    @property
    def name(self) -> str: ...

    def start(self) -> ServerInfo: ...

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult: ...

    def close(self) -> None: ...


# What makes a run's servers: a server's declaration, the pipeline's folder and the
# run's environment -> the port (the real adapter, a recorder around it, a replay).
ServerFactory = Callable[[ToolServerSpec, Path, Mapping[str, str]], ToolServer]


def cap_result(text: str, structured: JsonValue, is_error: bool, max_bytes: int) -> ToolResult:
    """The result with `text` cut to `max_bytes` (at a character boundary, with a marker
    naming both sizes) and `structured` dropped when its JSON is over `max_bytes`; an error
    result instead when either is not Unicode text (a lone surrogate no writer can write)."""
    problem = surrogate_problem(text) or surrogate_problem(structured)
    if problem is not None:
        return ToolResult(f"the tool's result is refused: {problem}", None, True)
    data = text.encode("utf-8")
    size = len(data)
    shape = None if structured is None else json.dumps(structured, ensure_ascii=False)
    structured_size = 0 if shape is None else len(shape.encode("utf-8"))
    if size <= max_bytes and structured_size <= max_bytes:
        return ToolResult(text, structured, is_error, size=size)
    kept = data[:max_bytes].decode("utf-8", errors="ignore")
    total = max(size, structured_size)
    marker = f"\n[result cut: {total} bytes, over the cap of {max_bytes}]"
    return ToolResult(
        kept + marker,
        structured if structured_size <= max_bytes else None,
        is_error,
        cut=True,
        size=total,
    )
