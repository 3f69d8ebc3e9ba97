"""The run-control tools of `serve --mcp` (getRun, decideRun, cancelRun) end to end: a
real server on 127.0.0.1 driven by the `mcp` SDK's own client, each answer compared
with the HTTP route the tool stands for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, types

from converge_dsl.serve._mcp_runs import CONTROL_TOOLS

from .conftest import DATA, ROOT, Server, serve_with_token
from .test_app import _expected
from .test_mcp import BEARER, TOKEN, _error_body, _session

MISSING = "0" * 32


@pytest.fixture
def served(tmp_path: Path, servers: list[Server]) -> str:
    server = serve_with_token(tmp_path, servers, [DATA], TOKEN, "--mcp")
    return server.ready()


def _run(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, result.content
    run = result.structuredContent
    assert run is not None
    [part] = result.content
    assert isinstance(part, types.TextContent)
    assert json.loads(part.text) == run
    return run


def test_the_control_tools_are_listed_with_names_no_pipeline_can_take(served: str) -> None:
    listed = {tool.name: tool for tool in _session(served, lambda s: s.list_tools()).tools}
    schema = json.loads((ROOT / "schemas" / "pipeline.v1.json").read_text())
    name = re.compile(schema["$defs"]["name"]["pattern"])
    for tool in CONTROL_TOOLS:
        assert name.fullmatch(tool) is None  # `validate` refuses a pipeline of that name
        assert listed[tool].inputSchema["required"] == ["run"]
        assert listed[tool].inputSchema["additionalProperties"] is False
        output = listed[tool].outputSchema
        assert output is not None
        assert output["type"] == "object"  # as MCP asks of every output schema
        assert output["$defs"]["Run"]["required"] == ["id", "pipeline", "status"]
    assert sorted(listed["decideRun"].inputSchema["properties"]) == [
        "approve",
        "decisions",
        "reject",
        "run",
    ]
    assert listed["getRun"].inputSchema["properties"]["wait"]["type"] == "boolean"


def test_a_paused_run_is_decided_over_mcp_and_finishes(served: str) -> None:
    async def calls(session: ClientSession) -> dict[str, types.CallToolResult]:
        paused = await session.call_tool("gated", {})
        ident = (paused.structuredContent or {})["id"]
        pending = [p["id"] for p in (paused.structuredContent or {})["result"]["pending"]]
        return {
            "paused": paused,
            "got": await session.call_tool("getRun", {"run": ident}),
            "unknown proposal": await session.call_tool(
                "decideRun", {"run": ident, "approve": ["s3"]}
            ),
            "bad body": await session.call_tool("decideRun", {"run": ident, "approve": "s1"}),
            "decided": await session.call_tool(
                "decideRun", {"run": ident, "approve": pending[:1], "reject": pending[1:]}
            ),
            "again": await session.call_tool("decideRun", {"run": ident, "approve": pending}),
        }

    results = _session(served, calls)
    paused = _run(results["paused"])
    assert paused["status"] == "paused"
    assert "the decideRun tool" in paused["note"]
    assert _run(results["got"]) == paused
    decided = _run(results["decided"])
    assert decided["id"] == paused["id"]
    assert decided["status"] == "done"
    assert [fact["id"] for fact in decided["result"]["facts"]["strategies"]] == ["s1"]
    assert "note" not in decided
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        over_http = http.get(f"/v1/runs/{paused['id']}").json()
        paused_again = http.post("/v1/pipelines/gated/runs?wait=true").json()
        route = f"/v1/runs/{paused_again['id']}/decisions"
        unknown = http.post(route, json={"approve": ["s3"]})
        bad = http.post(route, json={"approve": "s1"})
        http.delete(f"/v1/runs/{paused_again['id']}")
    assert over_http["result"] == decided["result"]
    bodies = {name: _error_body(results[name]) for name in ("unknown proposal", "bad body")}
    assert bodies["unknown proposal"] == {"status": 422, **unknown.json()}
    assert bodies["bad body"] == {"status": 422, **bad.json()}
    assert _error_body(results["again"])["status"] == 409  # done: no longer paused


def test_cancel_over_mcp_stops_a_queued_and_a_running_run(served: str) -> None:
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        running, queued = (http.post("/v1/pipelines/slow/runs").json()["id"] for _ in range(2))

    async def calls(session: ClientSession) -> list[types.CallToolResult]:
        return [
            await session.call_tool("cancelRun", {"run": queued}),
            await session.call_tool("cancelRun", {"run": running}),
            await session.call_tool("cancelRun", {"run": running}),
        ]

    cancelled = [_run(result) for result in _session(served, calls)]
    assert [run["status"] for run in cancelled] == ["cancelled"] * 3
    assert [run["id"] for run in cancelled] == [queued, running, running]
    assert "result" not in cancelled[1]
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        assert http.get(f"/v1/runs/{running}").json()["status"] == "cancelled"


def test_get_with_wait_answers_the_run_once_it_stops(served: str) -> None:
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        ident = http.post("/v1/pipelines/slow/runs").json()["id"]

    async def calls(session: ClientSession) -> list[types.CallToolResult]:
        return [
            await session.call_tool("getRun", {"run": ident}),
            await session.call_tool("getRun", {"run": ident, "wait": True}),
        ]

    now, waited = (_run(result) for result in _session(served, calls))
    assert now["status"] in ("queued", "running")
    assert "the getRun tool (wait: true)" in now["note"]
    assert waited["status"] == "done"
    assert waited["result"]["facts"]["notes"][0]["content"] == "done waiting"


def test_unknown_runs_and_bad_arguments_are_the_http_apis_errors(served: str) -> None:
    async def calls(session: ClientSession) -> dict[str, types.CallToolResult]:
        return {
            "no such run": await session.call_tool("getRun", {"run": MISSING}),
            "not a run id": await session.call_tool("cancelRun", {"run": "../etc"}),
            "decide no such run": await session.call_tool(
                "decideRun", {"run": MISSING, "approve": ["s1"]}
            ),
            "no run argument": await session.call_tool("getRun", {}),
            "bad arguments": await session.call_tool(
                "cancelRun", {"run": 7, "force": True, "wait": True}
            ),
            "wait not a boolean": await session.call_tool(
                "getRun", {"run": MISSING, "wait": "yes"}
            ),
            "misspelt tool": await session.call_tool("getRn", {"run": MISSING}),
        }

    bodies = {name: _error_body(result) for name, result in _session(served, calls).items()}
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        missing = http.get(f"/v1/runs/{MISSING}")
        malformed = http.delete("/v1/runs/..%2Fetc")
        decide_missing = http.post(f"/v1/runs/{MISSING}/decisions", json={"approve": ["s1"]})
    assert bodies["no such run"] == {"status": 404, **missing.json()}
    assert bodies["decide no such run"] == {"status": 404, **decide_missing.json()}
    assert bodies["not a run id"]["errors"][0]["code"] == malformed.json()["errors"][0]["code"]
    assert "did you mean 'getRun'?" in bodies["misspelt tool"]["errors"][0]["hint"]
    _expected("mcp_run_errors.json", bodies)


def test_a_control_tool_without_a_token_is_401(served: str) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "cancelRun", "arguments": {"run": MISSING}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    answer = httpx.post(f"{served}/mcp", json=call, headers=accept, timeout=30)
    assert answer.status_code == 401
    assert answer.json()["errors"][0]["code"] == "CD987"
    with pytest.raises(BaseExceptionGroup) as refused:
        _session(served, lambda s: s.call_tool("getRun", {"run": MISSING}), headers={})
    assert "401 Unauthorized" in str(_leaf(refused.value))


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def test_a_token_sent_as_a_run_id_is_redacted_in_the_error(served: str) -> None:
    async def calls(session: ClientSession) -> list[types.CallToolResult]:
        return [
            await session.call_tool("getRun", {"run": TOKEN}),  # a token has a run id's form
            await session.call_tool("cancelRun", {"run": f"x{TOKEN}"}),
        ]

    for result in _session(served, calls):
        body = _error_body(result)
        assert body["status"] == 404
        assert "[REDACTED]" in body["errors"][0]["message"]
        assert TOKEN not in json.dumps(body)


def test_waiting_on_a_stopped_run_keeps_nothing_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """getRun with `wait: true` on a run that already stopped answers it and keeps no
    waiter for it: each such call kept one (an end that never comes to pop it) for the
    life of the process."""
    from converge_dsl.serve._app import HttpLimits
    from converge_dsl.serve._service import RunService

    from .conftest import in_process

    services: list[RunService] = []
    made = RunService.__init__

    def kept(self: RunService, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        services.append(self)

    monkeypatch.setattr(RunService, "__init__", kept)
    mcp = {"Accept": "application/json, text/event-stream"}
    with in_process(tmp_path / "state", HttpLimits(), mcp=True) as url:
        with httpx.Client(base_url=url, timeout=30) as http:
            run = http.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "a"}})
            ident = run.json()["id"]
            for n in range(5):
                call = {"name": "getRun", "arguments": {"run": ident, "wait": True}}
                message = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call}
                answer = http.post("/mcp", json=message, headers=mcp)
                assert answer.status_code == 200, answer.text
                assert '\\"status\\": \\"done\\"' in answer.text
        (service,) = services
        assert ident not in service._runs.ended
