"""The run's deadline covers tool calls: a call is bounded by the smaller of its server's
`call_timeout_s` and what is left of `budget.max_wall_s`; a run that reaches its deadline
during a call of a hanging server stops with `time_budget_exhausted`, the server stopped.
A tool's input schema is made a validator once, on its first call, for every call after."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from converge_dsl.cli import run
from converge_dsl.clock import FakeClock
from converge_dsl.tools import McpToolServer, RunTools

from ._servers import FIXTURE, stdio_fixture
from .test_agent_tools import _running_with

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: deadline
tools:
  fixture:
    command: [{python}, {fixture}, stdio, "0", {marker}]
    allow: [hang]
    call_timeout_s: 120
budget: {{max_wall_s: 3}}
seeds: [{{id: go, content: go}}]
suggestors:
  - name: wait
    kind: tool
    call: mcp:fixture/hang
    dependencies: [seeds]
    arguments: {{}}
    target: signals
"""


def test_a_run_that_reaches_its_deadline_in_a_tool_call_stops_on_time(tmp_path: Path) -> None:
    marker = str(tmp_path / "deadline-marker")
    pipeline = tmp_path / "deadline.yaml"
    pipeline.write_text(
        PIPELINE.format(
            python=json.dumps(sys.executable), fixture=json.dumps(str(FIXTURE)), marker=marker
        )
    )
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", str(pipeline), "--format", "json"], out, err)
    result = json.loads(out.getvalue())
    assert result["stop_reason"] == "time_budget_exhausted", err.getvalue()
    assert code != 0
    assert _running_with(marker) == []


def test_a_call_is_cut_at_the_deadline_before_its_own_timeout(tmp_path: Path) -> None:
    """Without the engine watching: the tools' own bound stops the call and the server."""
    marker = tmp_path / "cut-marker"
    spec = stdio_fixture(marker=marker, call_timeout_s=120)
    clock = FakeClock()
    deadline = clock.monotonic() + 1.0
    made: list[McpToolServer] = []

    def factory(*args: object) -> McpToolServer:
        made.append(McpToolServer(*args))  # type: ignore[arg-type]
        return made[-1]

    tools = RunTools(
        {"fixture": spec}, tmp_path, factory=factory, clock=clock, deadline=lambda: deadline
    )
    try:
        text, is_error = asyncio.run(tools.call("wait", 1, "fixture", "hang", {}))
    finally:
        tools.close()
    assert is_error
    assert text.startswith("CD964: tool server 'fixture': the run's deadline")
    assert "the server was stopped" in text
    assert _running_with(str(marker)) == []


def test_a_tools_input_schema_is_made_a_validator_once_for_all_its_calls(
    tmp_path: Path, first_arguments: Callable[[ModuleType, str], list[object]]
) -> None:
    from converge_dsl.tools import FakeTool, FakeToolServer, _run

    built = first_arguments(_run, "python_validator")
    schema = {"type": "object", "required": ["text"]}
    server = FakeToolServer("s", [FakeTool("echo", lambda a: "ok", input_schema=schema)])
    tools = RunTools(
        {"fixture": stdio_fixture()}, tmp_path, environ={}, factory=lambda s, b, e: server
    )

    async def calls() -> list[tuple[str, bool]]:
        arguments: list[dict[str, Any]] = [{"text": "a"}, {}, {"text": "b"}]
        return [await tools.call("me", 1, "fixture", "echo", each) for each in arguments]

    ok, refused, again = asyncio.run(calls())
    assert ok == again == ("ok", False)
    assert refused == (
        "invalid input for mcp:fixture/echo: at /text: 'text' is a required property",
        True,
    )
    assert built == [schema]


def test_a_tool_listed_with_a_schema_that_is_not_json_schema_is_an_error_naming_it(
    tmp_path: Path,
) -> None:
    # Its arguments were validated against it anyway: python-jsonschema raised UnknownType
    # in the middle, and the run stopped with CD912 and a dump of the schema.
    from converge_dsl.tools import FakeTool, FakeToolServer

    schema = {"type": "object", "properties": {"q": {"type": "strang"}}}
    called: list[object] = []
    tool = FakeTool("echo", lambda a: called.append(a) or "ok", input_schema=schema)
    server = FakeToolServer("s", [tool])
    tools = RunTools(
        {"fixture": stdio_fixture()}, tmp_path, environ={}, factory=lambda s, b, e: server
    )
    text, is_error = asyncio.run(tools.call("me", 1, "fixture", "echo", {"q": "hi"}))
    assert is_error
    assert text.startswith(
        "tool 'mcp:fixture/echo' cannot be called: server 'fixture' lists it with an input "
        "schema that is not JSON Schema (at /properties/q/type: 'strang' is not valid"
    )
    assert text.endswith("the server's definition of the tool must be fixed")
    assert called == []
    # An agent is offered it with an object's schema (a provider refuses a whole request
    # over one broken schema), its description saying why it cannot be called.
    (offered,) = asyncio.run(tools.listing("fixture"))
    assert (offered.name, offered.input_schema) == ("mcp:fixture/echo", {"type": "object"})
    assert offered.description.startswith(
        "Cannot be called: its server lists it with an input schema that is not JSON Schema "
        "(at /properties/q/type: 'strang' is not valid"
    )
