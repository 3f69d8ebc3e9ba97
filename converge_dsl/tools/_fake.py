"""`FakeToolServer`: the tools port answered by Python functions, for tests.

Each tool is a `FakeTool`: its name, input schema and a function from the
arguments to a `ToolResult` (or to text). It keeps every call it answered, in
order (`calls`), applies the same cap as a real server, and fails as a real
one does: `start` raises `ToolFailure` when told to (`fail_start`), a call
after `close` fails with the server gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from converge_dsl import codes
from converge_dsl._json_types import JsonObject, JsonSchema
from converge_dsl.tools._port import (
    DEFAULT_MAX_RESULT_BYTES,
    ServerInfo,
    ToolFailure,
    ToolInfo,
    ToolResult,
    cap_result,
)


@dataclass(frozen=True)
class FakeTool:
    """A tool of a `FakeToolServer`: `answer(arguments)` gives its result or its text."""

    name: str
    answer: Callable[[JsonObject], ToolResult | str]
    input_schema: JsonSchema = field(default_factory=lambda: {"type": "object"})
    description: str = ""


class FakeToolServer:
    """The tools port over `tools` (see the module docstring)."""

    def __init__(
        self,
        name: str,
        tools: Sequence[FakeTool],
        *,
        version: str = "0.0.0",
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        fail_start: str | None = None,
    ) -> None:
        self._name = name
        self.tools = {tool.name: tool for tool in tools}
        self.version = version
        self.max_result_bytes = max_result_bytes
        self.fail_start = fail_start
        self.calls: list[tuple[str, JsonObject]] = []
        self.started = False
        self.closed = False

    @property
    def name(self) -> str:
        return self._name

    def start(self) -> ServerInfo:
        if self.fail_start is not None:
            raise ToolFailure(codes.TOOL_SERVER_NOT_STARTED, self._name, self.fail_start)
        self.started = True
        return ServerInfo(
            self._name,
            self.version,
            tuple(ToolInfo(t.name, t.description, t.input_schema) for t in self.tools.values()),
        )

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        if self.closed or not self.started:
            raise ToolFailure(
                codes.TOOL_SERVER_GONE, self._name, f"tool server {self._name!r} is not running"
            )
        self.calls.append((tool, arguments))
        found = self.tools.get(tool)
        if found is None:
            return ToolResult(f"unknown tool {tool!r}", is_error=True)
        answer = found.answer(arguments)
        if isinstance(answer, str):
            answer = ToolResult(answer)
        return cap_result(answer.text, answer.structured, answer.is_error, self.max_result_bytes)

    def close(self) -> None:
        self.closed = True
