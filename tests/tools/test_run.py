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
from converge_dsl.frontend import StdioServerSpec
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
    deadline: list[float | None] = [None]  # set once started: a start is cut at it too
    made: list[McpToolServer] = []

    def factory(*args: object) -> McpToolServer:
        made.append(McpToolServer(*args))  # type: ignore[arg-type]
        return made[-1]

    tools = RunTools(
        {"fixture": spec}, tmp_path, factory=factory, clock=clock, deadline=lambda: deadline[0]
    )
    asyncio.run(tools.started("fixture"))
    deadline[0] = clock.monotonic() + 1.0
    try:
        text, is_error = asyncio.run(tools.call("wait", 1, "fixture", "hang", {}))
    finally:
        tools.close()
    assert is_error
    assert text.startswith("CD964: tool server 'fixture': the run's deadline")
    assert "the server was stopped" in text
    assert _running_with(str(marker)) == []


SLOW_START = Path(__file__).resolve().parent / "slow_start_server.py"


def test_a_run_that_reaches_its_deadline_while_a_server_starts_stops_on_time(
    tmp_path: Path,
) -> None:
    # The start waited its start_timeout_s (10 s) past max_wall_s: 1, then the run ended
    # with time_budget_exhausted about ten seconds late.
    import time

    from mcp import ClientSession  # noqa: F401 (imported as a run would: not timed)

    marker = str(tmp_path / "slow-start-marker")
    pipeline = tmp_path / "slow.yaml"
    command = json.dumps([sys.executable, str(SLOW_START), marker])
    pipeline.write_text(
        PIPELINE.replace('{python}, {fixture}, stdio, "0", {marker}', command[1:-1])
        .replace("max_wall_s: 3", "max_wall_s: 1")
        .replace("[hang]", "[echo]")
        .replace("mcp:fixture/hang", "mcp:fixture/echo")
        .replace("{{", "{")
        .replace("}}", "}")
    )
    out, err = io.StringIO(), io.StringIO()
    began = time.monotonic()
    code = run(["run", str(pipeline), "--format", "json"], out, err)
    took = time.monotonic() - began
    assert json.loads(out.getvalue())["stop_reason"] == "time_budget_exhausted", err.getvalue()
    assert code != 0
    assert took < 2.0  # ~1 s; room for a loaded machine, none for the start's 10 s
    assert _running_with(marker) == []


def test_a_start_is_cut_at_the_deadline_before_its_own_timeout(tmp_path: Path) -> None:
    """Without the engine watching: the tools' own bound stops the start and the server."""
    import time

    marker = str(tmp_path / "cut-start-marker")
    spec = StdioServerSpec(
        name="slow", command=(sys.executable, str(SLOW_START), marker), allow=("echo",)
    )
    clock = FakeClock()
    deadline = clock.monotonic() + 0.5
    tools = RunTools({"slow": spec}, tmp_path, clock=clock, deadline=lambda: deadline)
    began = time.monotonic()
    try:
        text, is_error = asyncio.run(tools.call("wait", 1, "slow", "echo", {}))
    finally:
        tools.close()
    assert time.monotonic() - began < 5  # its start_timeout_s is 10
    assert (text, is_error) == (
        "CD963: tool server 'slow': the run's deadline (budget.max_wall_s) passed while it "
        "started; the server was stopped (hint: raise budget.max_wall_s, or find why the "
        "server is slow to start)",
        True,
    )
    assert _running_with(marker) == []


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
