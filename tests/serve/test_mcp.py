"""`serve --mcp` end to end: a real server on 127.0.0.1, driven by the `mcp` SDK's own
client (`streamable_http_client` + `ClientSession`), by httpx, and by a pipeline whose
`tool` suggestor calls a served pipeline through its `tools:` declaration."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from converge_dsl.cli import run
from converge_dsl.serve import ServeOptions, prepare
from converge_dsl.serve._errors import ServeRefused
from converge_dsl.serve._mcp import IDEMPOTENCY_META, loopback_host, tool_name, tool_names
from converge_dsl.serve._store import STATE_FILE

from .conftest import DATA, Server, serve_with_token
from .test_app import EXPECTED, _expected

TOKEN = "5e7b1d4a9f8e2c6b3a1d0f9e8cc0ffee"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
T = TypeVar("T")
# The longest any test waits for one exchange with the server.
BOUND_S = 60.0
# The bound of a call the test expects to be cut short.
SHORT_S = 8.0


@pytest.fixture
def served(tmp_path: Path, servers: list[Server]) -> str:
    server = serve_with_token(tmp_path, servers, [DATA], TOKEN, "--mcp")
    return server.ready()


def _session(
    url: str,
    use: Callable[[ClientSession], Awaitable[T]],
    headers: dict[str, str] | None = None,
    *,
    bound: float = BOUND_S,
) -> T:
    """`use` a fresh initialised MCP session with the server at `url` (bounded)."""

    async def main() -> T:
        sent = BEARER if headers is None else headers
        async with (
            httpx.AsyncClient(headers=sent, timeout=bound) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await use(session)

    return asyncio.run(asyncio.wait_for(main(), bound))


def _error_body(result: types.CallToolResult) -> dict[str, Any]:
    assert result.isError
    assert result.structuredContent is None
    [part] = result.content
    assert isinstance(part, types.TextContent)
    body: dict[str, Any] = json.loads(part.text)
    return body


def test_each_pipeline_is_a_tool_whose_input_schema_is_the_openapi_inputs(served: str) -> None:
    listed = _session(served, lambda s: s.list_tools())
    openapi = httpx.get(f"{served}/v1/openapi.json", headers=BEARER, timeout=30).json()
    schemas = openapi["components"]["schemas"]
    tools = {tool.name: tool for tool in listed.tools}
    assert sorted(tools) == [
        "cancelRun",
        "decideRun",
        "echo",
        "gated",
        "getRun",
        "slow",
        "steady",
    ]
    assert tools["echo"].inputSchema == schemas["EchoInputs"]
    assert tools["echo"].inputSchema["required"] == ["text"]
    assert tools["slow"].inputSchema == schemas["SlowInputs"]
    assert tools["echo"].description == (
        "Echoes its required input as a fact, through one scripted model call."
    )
    output = tools["echo"].outputSchema
    assert output is not None
    assert output["type"] == "object"  # as MCP asks of every output schema
    assert output["$defs"]["Run"]["required"] == ["id", "pipeline", "status"]
    assert "components" not in json.dumps(output)  # self-contained: its refs are its own


def test_a_call_runs_the_pipeline_as_wait_true_does(served: str) -> None:
    result = _session(served, lambda s: s.call_tool("echo", {"text": "hi"}))
    assert not result.isError
    run = result.structuredContent
    assert run is not None
    assert run["status"] == "done"
    assert run["stop_reason"] == "converged"
    assert run["result"]["facts"]["echoes"][0]["data"] == {"text": "hi"}
    assert run["links"]["run"] == f"{served}/v1/runs/{run['id']}"
    assert "note" not in run
    [part] = result.content
    assert isinstance(part, types.TextContent)
    assert json.loads(part.text) == run
    over_http = httpx.get(run["links"]["run"], headers=BEARER, timeout=30).json()
    assert over_http["result"] == run["result"]


def test_a_budget_in_meta_lowers_the_runs(served: str) -> None:
    async def calls(session: ClientSession) -> list[types.CallToolResult]:
        return [
            await session.call_tool(
                "echo", {"text": "x"}, meta={"converge-dsl/budget": {"max_cycles": 1}}
            ),
            await session.call_tool("echo", {"text": "x"}),
        ]

    lowered, whole = _session(served, calls)
    assert lowered.structuredContent is not None
    assert whole.structuredContent is not None
    assert lowered.structuredContent["stop_reason"] == "cycle_budget_exhausted"
    assert whole.structuredContent["stop_reason"] == "converged"


def test_bad_inputs_are_the_http_apis_located_errors(served: str) -> None:
    async def calls(session: ClientSession) -> dict[str, types.CallToolResult]:
        return {
            "unknown_and_missing": await session.call_tool("echo", {"txet": "x"}),
            "budget_raised": await session.call_tool(
                "echo",
                {"text": "x"},
                meta={"converge-dsl/budget": {"max_cycles": 11, "max_tokens": -1}},
            ),
            "no_tool": await session.call_tool("ecko", {}),
            "a_token_in_an_argument_name": await session.call_tool(
                "echo", {"text": "x", TOKEN: "y"}
            ),
        }

    bodies = {name: _error_body(result) for name, result in _session(served, calls).items()}
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        unknown = http.post("/v1/pipelines/echo/runs", json={"inputs": {"txet": "x"}})
        raised = http.post(
            "/v1/pipelines/echo/runs",
            json={"inputs": {"text": "x"}, "budget": {"max_cycles": 11, "max_tokens": -1}},
        )
    assert bodies["unknown_and_missing"] == {"status": 422, **unknown.json()}
    assert bodies["budget_raised"] == {"status": 422, **raised.json()}
    # the redactor, on every field of an error, its pointer too (as over HTTP)
    [secret] = bodies["a_token_in_an_argument_name"]["errors"]
    assert "[REDACTED]" in secret["message"]
    assert TOKEN not in json.dumps(secret)
    _expected("mcp_errors.json", bodies)


def _runs(state: Path, pipeline: str) -> int:
    """How many runs of `pipeline` the service's state holds (read beside the server)."""
    with contextlib.closing(sqlite3.connect(state / STATE_FILE, timeout=10)) as db:
        [(count,)] = db.execute("SELECT COUNT(*) FROM runs WHERE pipeline = ?", (pipeline,))
    return int(count)


def _keyed(key: Any) -> dict[str, Any]:
    return {IDEMPOTENCY_META: key}


def test_a_retried_call_with_its_idempotency_key_answers_the_first_run(
    served: str, tmp_path: Path
) -> None:
    async def calls(session: ClientSession) -> dict[str, types.CallToolResult]:
        first = await session.call_tool("echo", {"text": "once"}, meta=_keyed("order-17"))
        return {
            "first": first,
            "again": await session.call_tool("echo", {"text": "once"}, meta=_keyed("order-17")),
            "other inputs": await session.call_tool(
                "echo", {"text": "twice"}, meta=_keyed("order-17")
            ),
            "other budget": await session.call_tool(
                "echo",
                {"text": "once"},
                meta={**_keyed("order-17"), "converge-dsl/budget": {"max_cycles": 1}},
            ),
            "other pipeline": await session.call_tool(
                "steady", {"number": 1}, meta=_keyed("order-17")
            ),
            "no key": await session.call_tool("echo", {"text": "once"}),
            "long key": await session.call_tool("echo", {"text": "once"}, meta=_keyed("x" * 256)),
            "number key": await session.call_tool("echo", {"text": "once"}, meta=_keyed(17)),
        }

    results = _session(served, calls)
    first, again = results["first"].structuredContent, results["again"].structuredContent
    assert first is not None
    assert again == first  # the same run, answered again: nothing queued
    assert first["status"] == "done"
    fresh = results["no key"].structuredContent
    assert fresh is not None
    assert fresh["id"] != first["id"]
    assert _runs(tmp_path / "state", "echo") == 2  # the keyed run once, the unkeyed one
    assert _runs(tmp_path / "state", "steady") == 0
    bodies = {
        name: _error_body(results[name])
        for name in ("other inputs", "other budget", "other pipeline", "long key", "number key")
    }
    # one store of keys: over HTTP the key is the same run, and the same conflict
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        keyed = {**BEARER, "Idempotency-Key": "order-17"}
        same = http.post(
            "/v1/pipelines/echo/runs", json={"inputs": {"text": "once"}}, headers=keyed
        )
        other = http.post(
            "/v1/pipelines/echo/runs", json={"inputs": {"text": "twice"}}, headers=keyed
        )
    assert same.json()["id"] == first["id"]
    # the same refusal, naming where each key was given
    over_http = json.dumps({"status": 409, **other.json()}).replace(
        "the Idempotency-Key header", "the _meta key converge-dsl/idempotency-key"
    )
    assert bodies["other inputs"] == json.loads(over_http)
    assert "Idempotency-Key" not in json.dumps(bodies["other inputs"])
    assert [body["status"] for body in bodies.values()] == [409, 409, 409, 400, 400]
    _expected("mcp_idempotency.json", bodies)


def test_a_call_retried_while_its_run_runs_waits_for_that_run(served: str, tmp_path: Path) -> None:
    async def calls(session: ClientSession) -> list[types.CallToolResult]:
        first = asyncio.create_task(session.call_tool("slow", {}, meta=_keyed("slow-1")))
        deadline = time.monotonic() + BOUND_S
        while _runs(tmp_path / "state", "slow") == 0:  # the first call's run is queued
            assert time.monotonic() < deadline, "the first call queued no run"
            await asyncio.sleep(0.02)
        again = await session.call_tool("slow", {}, meta=_keyed("slow-1"))
        return [await first, again]

    first, again = _session(served, calls)
    assert first.structuredContent is not None
    assert again.structuredContent == first.structuredContent
    assert first.structuredContent["status"] == "done"
    assert _runs(tmp_path / "state", "slow") == 1


def test_without_a_token_the_endpoint_is_401(served: str) -> None:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    missing = httpx.post(f"{served}/mcp", json=hello, headers=accept, timeout=30)
    wrong = httpx.post(
        f"{served}/mcp", json=hello, headers={**accept, "Authorization": "Bearer nope"}, timeout=30
    )
    right = httpx.post(f"{served}/mcp", json=hello, headers={**accept, **BEARER}, timeout=30)
    assert missing.status_code == wrong.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["errors"][0]["code"] == "CD987"
    assert right.status_code == 200
    with pytest.raises(BaseExceptionGroup) as refused:
        _session(served, lambda s: s.list_tools(), headers={})
    assert "401 Unauthorized" in str(_leaf(refused.value))


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def test_a_body_over_the_cap_is_413(tmp_path: Path, servers: list[Server]) -> None:
    server = Server([DATA / "echo.yaml"], tmp_path / "state", "--mcp", "--body-cap", "300")
    servers.append(server)
    url = server.ready()
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x" * 300}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    answer = httpx.post(f"{url}/mcp", json=call, headers=accept, timeout=30)
    assert answer.status_code == 413
    assert answer.json()["errors"][0]["code"] == "CD989"
    small = _session(url, lambda s: s.call_tool("echo", {"text": "x"}))
    assert not small.isError


def test_a_full_queue_is_a_tool_error_with_the_retry_hint(served: str) -> None:
    with httpx.Client(base_url=served, headers=BEARER, timeout=30) as http:
        runs = [http.post("/v1/pipelines/slow/runs") for _ in range(3)]
        try:
            assert [r.status_code for r in runs] == [202, 202, 202]  # one running, two waiting
            result = _session(served, lambda s: s.call_tool("slow", {}))
        finally:
            for answer in runs:
                http.delete(f"/v1/runs/{answer.json()['id']}")
    body = _error_body(result)
    assert body["status"] == 429
    assert body["retry_after"] == 1
    [problem] = body["errors"]
    assert problem["code"] == "CD988"
    assert "Retry-After" in problem["hint"]


def test_a_paused_run_answers_with_its_id_and_where_to_decide(served: str) -> None:
    result = _session(served, lambda s: s.call_tool("gated", {}))
    assert not result.isError
    run = result.structuredContent
    assert run is not None
    assert run["status"] == "paused"
    decisions = run["links"]["decisions"]
    assert decisions == f"{served}/v1/runs/{run['id']}/decisions"
    assert f"POST {decisions}" in run["note"]
    pending = [p["id"] for p in run["result"]["pending"]]
    decided = httpx.post(decisions, json={"approve": pending}, headers=BEARER, timeout=30)
    assert decided.status_code == 200


def test_a_run_past_the_wait_says_where_to_follow_it(tmp_path: Path, servers: list[Server]) -> None:
    server = Server([DATA / "slow.yaml"], tmp_path / "state", "--mcp", "--wait-timeout", "0.5")
    servers.append(server)
    url = server.ready()
    result = _session(url, lambda s: s.call_tool("slow", {}))
    run = result.structuredContent
    assert run is not None
    assert run["status"] in ("queued", "running")
    assert f"GET {url}/v1/runs/{run['id']}" in run["note"]
    httpx.delete(run["links"]["run"], timeout=30)


def test_progress_notifications_carry_the_runs_events(served: str) -> None:
    heard: list[tuple[float, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, message))

    result = _session(
        served, lambda s: s.call_tool("echo", {"text": "p"}, progress_callback=progress)
    )
    assert not result.isError
    run = result.structuredContent
    assert run is not None
    events = httpx.get(run["links"]["events"], headers=BEARER, timeout=30).text
    types_ = [
        json.loads(chunk.split("\ndata: ", 1)[1])["type"]
        for chunk in events.split("\n\n")
        if chunk.startswith("id: ")
    ]
    assert len(types_) > 3
    assert heard == [(float(n), kind) for n, kind in enumerate(types_, 1)]


RELAY = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: relay
description: Asks the served echo pipeline, as an MCP tool, to echo a word.
inputs:
  word: {{description: The word to relay, required: true}}
tools:
  served:
    url: {url}/mcp
    hosts: [127.0.0.1]
    headers: {{Authorization: RELAY_TOKEN}}
    allow: [echo]
seeds: [{{id: go, content: go}}]
suggestors:
  - name: ask
    kind: tool
    call: mcp:served/echo
    dependencies: [seeds]
    arguments: {{text: "{{{{ inputs.word }}}}"}}
    target: hypotheses
    output:
      id: relayed
      content: "{{{{ item.result.facts.echoes[0].content }}}} ({{{{ item.status }}}})"
"""


def test_a_served_pipeline_calls_another_served_one_as_an_mcp_tool(
    tmp_path: Path, servers: list[Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """MCP client -> relay (served) -> its `tool` suggestor -> echo (served) over MCP."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN}\n")
    echo = Server([DATA / "echo.yaml"], tmp_path / "echo", "--mcp", "--token-file", str(tokens))
    servers.append(echo)
    relay_file = tmp_path / "relay.yaml"
    relay_file.write_text(RELAY.format(url=echo.ready()))
    monkeypatch.setenv("RELAY_TOKEN", f"Bearer {TOKEN}")
    relay = Server([relay_file], tmp_path / "relay", "--mcp")
    servers.append(relay)
    result = _session(relay.ready(), lambda s: s.call_tool("relay", {"word": "ping"}), {})
    assert not result.isError, result.content
    run = result.structuredContent
    assert run is not None
    assert run["status"] == "done"
    [fact] = run["result"]["facts"]["hypotheses"]
    assert fact["content"] == "echo: ping (done)"


def test_tool_names_keep_mcp_characters_and_refuse_a_collision(tmp_path: Path) -> None:
    assert tool_name("market-entry.v2") == "market-entry.v2"
    assert tool_name("a" * 130) == "a" * 128
    assert tool_names(["echo", "slow"]) == {"echo": "echo", "slow": "slow"}
    paths = []
    for last in ("x", "y"):  # names that agree in their first 128 characters
        path = tmp_path / f"{last}.yaml"
        path.write_text(
            (DATA / "gated.yaml").read_text().replace("name: gated", f"name: {'g' * 128}{last}")
        )
        paths.append(path)
    state = tmp_path / "state"
    with pytest.raises(ServeRefused, match=r"CD436"):
        prepare(ServeOptions(pipelines=paths, state=state, mcp=True))
    assert not state.exists()  # refused before the state opened
    err = io.StringIO()
    argv = ["serve", *map(str, paths), "--mcp", "--state", str(state)]
    assert run(argv, io.StringIO(), err, {"NO_COLOR": "1"}) == 3
    _expected_text("mcp_tool_name_taken.txt", err.getvalue().replace(str(tmp_path), "TMP"))
    prepare(ServeOptions(pipelines=paths, state=state)).service.store.close()  # fine without


def test_the_endpoint_is_mounted_only_with_mcp(tmp_path: Path) -> None:
    for mcp, mounted in ((True, True), (False, False)):
        prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "s", mcp=mcp))
        try:
            paths = [getattr(route, "path", "") for route in prepared.app.routes]
            assert ("/mcp" in paths) is mounted
        finally:
            prepared.service.store.close()


def test_a_host_without_a_port_is_the_servers_on_port_80_only() -> None:
    """HTTP clients leave port 80 out of `Host`: a loopback server on 80 takes the bare
    name (it refused `Host: 127.0.0.1` with 421); on another port, or one not known, not."""
    for name in ("127.0.0.1", "localhost", "[::1]"):
        assert loopback_host(name, 80)
        assert loopback_host(f"{name}:80", 80)
        assert loopback_host(f"{name}:8080", 8080)
        assert not loopback_host(name, 8080)
        assert not loopback_host(name, None)
    assert not loopback_host("example.com", 80)
    assert not loopback_host("127.0.0.1.example.com", 80)
    assert not loopback_host("", 80)


def test_an_mcp_client_of_a_server_on_port_80_is_answered(tmp_path: Path) -> None:
    """The whole endpoint, the SDK's own Host check behind the service's, as a server on
    port 80 sees a client's request (`Host: 127.0.0.1`), without binding port 80."""
    from converge_dsl.serve._app import HttpLimits, build_app
    from converge_dsl.serve._mcp import McpEndpoint

    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "s"))
    endpoint = McpEndpoint(prepared.service, None, HttpLimits(), loopback=True)
    app = build_app(prepared.service, None, HttpLimits(), endpoint)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}

    def listening_on(port: int) -> Any:
        """`app` as uvicorn serves it from a socket of `port` (its scope's `server`)."""

        async def served(scope: Any, receive: Any, send: Any) -> None:
            await app({**scope, "server": ("127.0.0.1", port)}, receive, send)

        return served

    async def posts() -> list[httpx.Response]:
        answers = []
        async with endpoint.running():
            for port in (80, 8080):
                transport = httpx.ASGITransport(app=listening_on(port))
                async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
                    bare = {**accept, "Host": "127.0.0.1"}
                    answers.append(await client.post("/mcp", json=message, headers=bare))
        return answers

    try:
        on_80, on_8080 = asyncio.run(posts())
    finally:
        prepared.service.store.close()
    assert on_80.status_code == 200, on_80.text
    assert '"name":"echo"' in on_80.text.replace(" ", "")
    assert on_8080.status_code == 421
    assert on_8080.json()["errors"][0]["code"] == "CD444"


def test_mcp_without_the_mcp_package_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # `import mcp` raises ImportError
    out, err = io.StringIO(), io.StringIO()
    argv = ["serve", str(DATA / "echo.yaml"), "--mcp", "--state", str(tmp_path / "s")]
    code = run(argv, out, err, {"NO_COLOR": "1"})
    assert code == 3
    _expected_text("mcp_not_installed.txt", err.getvalue())
    assert not (tmp_path / "s").exists()


def _expected_text(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED") == "1":  # rewrites it: read the diff
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def _slow(folder: Path, delay_s: float) -> Path:
    """slow.yaml in `folder`, its one model call taking `delay_s` seconds."""
    (folder / "slow.yaml").write_text((DATA / "slow.yaml").read_text())
    (folder / "slow.script.yaml").write_text(
        (DATA / "slow.script.yaml").read_text().replace("delay_s: 3", f"delay_s: {delay_s}")
    )
    return folder / "slow.yaml"


def test_a_tool_call_in_flight_at_sigterm_is_answered_with_where_to_fetch_its_run(
    tmp_path: Path, servers: list[Server]
) -> None:
    """SIGTERM while a tool call and a `?wait=true` wait for a run in a slow model call:
    the tool call is answered before the stop (a tool error, 503 CD463, naming the run and
    how to fetch it once the server is back), the HTTP wait with 202 and the run as it is;
    the server exits 0 and, started again on the same state, finishes each run once.
    Before, the tool call's event stream closed with no answer at the signal, and the
    SDK's client waited for its own timeout."""
    path, state = _slow(tmp_path, 6), tmp_path / "state"
    server = Server([path], state, "--mcp")
    servers.append(server)
    url = server.ready()
    called: list[tuple[float, types.CallToolResult]] = []
    waited: list[tuple[float, httpx.Response]] = []

    def call() -> None:
        result = _session(url, lambda s: s.call_tool("slow", {}), bound=30)
        called.append((time.monotonic(), result))

    def wait() -> None:
        answer = httpx.post(f"{url}/v1/pipelines/slow/runs?wait=true", timeout=30)
        waited.append((time.monotonic(), answer))

    threads = [threading.Thread(target=call), threading.Thread(target=wait)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + BOUND_S
    while "converge_runs_in_progress 2" not in httpx.get(f"{url}/metrics", timeout=10).text:
        assert time.monotonic() < deadline, "the runs did not start"
        time.sleep(0.05)
    signalled = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(SHORT_S * 2)
    assert called, "the tool call got no answer"
    at, result = called[0]
    assert at - signalled < SHORT_S  # by `ANSWER_S` (4 s), not the client's 30 s
    body = _error_body(result)
    assert body["status"] == 503
    [problem] = body["errors"]
    assert problem["code"] == "CD463"
    run = problem["message"].split("run ", 1)[1].split(" ", 1)[0]
    assert len(run) == 32
    assert f'"run": "{run}"' in problem["hint"]
    assert f"/v1/runs/{run}" in problem["hint"]
    at, answer = waited[0]
    assert at - signalled < SHORT_S
    assert answer.status_code == 202
    assert answer.json()["status"] in ("running", "queued")
    assert server.exit_code(timeout=15) == 0
    assert "Traceback" not in "".join(server.stderr)
    _finish_once(Server([path], state, "--mcp"), servers, state, run, answer.json()["id"])


def _finish_once(again: Server, servers: list[Server], state: Path, *runs: str) -> None:
    """`again`, started on `state`, finishes each of `runs` once: `done`, one result, one
    `run_finished` event (the first by the getRun tool with `wait`)."""
    servers.append(again)
    url = again.ready()
    fetched = _session(url, lambda s: s.call_tool("getRun", {"run": runs[0], "wait": True}))
    assert fetched.structuredContent is not None
    assert fetched.structuredContent["status"] == "done"
    deadline = time.monotonic() + BOUND_S
    for ident in runs:
        while httpx.get(f"{url}/v1/runs/{ident}", timeout=10).json()["status"] != "done":
            assert time.monotonic() < deadline, "the run did not finish"
            time.sleep(0.1)
    again.stop()
    with contextlib.closing(sqlite3.connect(state / STATE_FILE)) as db:
        rows = db.execute("SELECT id, status FROM runs").fetchall()
        results = db.execute("SELECT run, COUNT(*) FROM results GROUP BY run").fetchall()
        finished = db.execute(
            "SELECT run, COUNT(*) FROM events WHERE line LIKE '%\"run_finished\"%' GROUP BY run"
        ).fetchall()
    assert sorted(rows) == sorted((ident, "done") for ident in runs)
    assert sorted(results) == sorted(finished) == sorted((ident, 1) for ident in runs)


def test_a_fault_in_a_tool_call_is_the_services_500_not_the_exceptions_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault of the service under a tools/call (here the queue failing): a tool error
    whose text is the HTTP API's 500 (CD445), nothing of the exception in it, its
    traceback in the server's log; the SDK sent the exception's own text, unredacted,
    and logged nothing."""
    from converge_dsl.serve._app import HttpLimits
    from converge_dsl.serve._service import RunService

    from .conftest import in_process

    def broken(self: object, *args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals /srv/state")

    monkeypatch.setattr(RunService, "submit", broken)
    call = {"name": "echo", "arguments": {"text": "a"}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
    accept = {"Accept": "application/json, text/event-stream"}
    with in_process(tmp_path / "state", HttpLimits(), mcp=True, log_config=None) as url:
        answer = httpx.post(f"{url}/mcp", json=message, headers=accept, timeout=30)
    assert answer.status_code == 200
    assert "secret" not in answer.text
    data = answer.text.split("data: ", 1)[1]
    result = json.loads(data)["result"]
    assert result["isError"] is True
    body = json.loads(result["content"][0]["text"])
    assert body["status"] == 500
    assert body["errors"][0]["code"] == "CD445"
    assert "RuntimeError: secret internals" in caplog.text


def test_a_response_posted_to_the_endpoint_is_accepted_without_an_error_logged(
    tmp_path: Path, servers: list[Server]
) -> None:
    """A JSON-RPC response (or error) posted to /mcp: this stateless server sends no request,
    so it awaits none. It was handed to the SDK, which answered 202 but logged an ERROR
    with a traceback-like line for each (a client could fill the log); now it is accepted
    (202) by the endpoint, and the log stays empty. Every method but POST is a 405 in the
    service's words."""
    server = serve_with_token(tmp_path, servers, [DATA / "echo.yaml"], TOKEN, "--mcp")
    url = server.ready()
    headers = {"Accept": "application/json, text/event-stream", **BEARER}
    with httpx.Client(base_url=url, headers=headers, timeout=BOUND_S) as http:
        for message in (
            {"jsonrpc": "2.0", "id": 5, "result": {}},
            {"jsonrpc": "2.0", "id": "x", "error": {"code": -32600, "message": "no"}},
        ):
            answer = http.post("/mcp", json=message)
            assert (answer.status_code, answer.content) == (202, b"")
        for method in ("GET", "DELETE", "PUT"):  # DELETE and PUT were the SDK's own JSON-RPC
            answer = http.request(method, "/mcp", content=b"{}")
            (problem,) = answer.json()["errors"]
            assert (answer.status_code, problem["code"]) == (405, "CD990"), method
            assert answer.headers["allow"] == "POST"
        listed = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert listed.status_code == 200
    server.stop()
    assert server.exit_code() == 0
    assert "".join(server.stderr).splitlines()[1:] == []  # past "serving ... on URL"


_ECHO_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "a"}},
}
_ACCEPT = {"Accept": "application/json, text/event-stream"}


def _echo_status(url: str) -> str:
    """The status of the run of the echo tool called at `url`, read from its event stream."""
    answer = httpx.post(f"{url}/mcp", json=_ECHO_CALL, headers=_ACCEPT, timeout=BOUND_S)
    assert answer.status_code == 200, answer.text
    assert "data: " in answer.text, (answer.headers, answer.text)
    result = json.loads(answer.text.split("data: ", 1)[1])["result"]
    status: str = result["structuredContent"]["status"]
    return status


def test_a_server_started_after_one_stopped_by_a_signal_answers_tool_calls(
    tmp_path: Path,
) -> None:
    """`serve` stopped by a SIGTERM, then another server in the same process: its tool
    calls were answered 200 with an event stream that closed with no event (sse_starlette's
    process-wide exit flag, set by the first stop, ended every stream after it)."""
    from converge_dsl.serve import serve
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    with in_process(tmp_path / "first", HttpLimits(), mcp=True) as url:
        assert _echo_status(url) == "done"  # the SDK's event streams are loaded
    options = ServeOptions([DATA / "echo.yaml"], port=0, state=tmp_path / "second")
    serve(options, lambda url: os.kill(os.getpid(), signal.SIGTERM))
    with in_process(tmp_path / "third", HttpLimits(), mcp=True) as url:
        assert _echo_status(url) == "done"


def _in_progress(url: str) -> None:
    """Once a run of the server at `url` is in progress (bounded)."""
    deadline = time.monotonic() + BOUND_S
    while "converge_runs_in_progress 1" not in httpx.get(f"{url}/metrics", timeout=10).text:
        assert time.monotonic() < deadline, "the run did not start"
        time.sleep(0.05)


def test_a_server_stopped_by_a_signal_leaves_another_servers_calls_alone(
    tmp_path: Path,
) -> None:
    """Two servers in one process, each with a tool call in flight; one (`serve`) is
    stopped by SIGTERM: its call is answered that the server stops (CD463), the other's
    call runs on to its run's end. Before, sse-starlette's process-wide exit flag, set by
    the stop, ended every event stream of the process: both calls got no answer."""
    from converge_dsl.serve import serve
    from converge_dsl.serve._app import HttpLimits

    from .conftest import in_process

    path = _slow(tmp_path, 6)
    answers: dict[str, types.CallToolResult] = {}

    def call(name: str, url: str) -> threading.Thread:
        def calling() -> None:
            answers[name] = _session(url, lambda s: s.call_tool("slow", {}), bound=30)

        thread = threading.Thread(target=calling)
        thread.start()
        return thread

    callers: list[threading.Thread] = []
    with in_process(tmp_path / "other", HttpLimits(), mcp=True, paths=(path,)) as other:

        def stop_when_running(url: str) -> None:
            callers.extend([call("other", other), call("stopped", url)])
            _in_progress(other)
            _in_progress(url)
            os.kill(os.getpid(), signal.SIGTERM)

        options = ServeOptions([path], port=0, state=tmp_path / "stopped", mcp=True)
        serve(options, lambda url: threading.Thread(target=stop_when_running, args=(url,)).start())
        for caller in callers:
            caller.join(BOUND_S)
    [problem] = _error_body(answers["stopped"])["errors"]
    assert problem["code"] == "CD463"
    assert not answers["other"].isError
    assert answers["other"].structuredContent is not None
    assert answers["other"].structuredContent["status"] == "done"


def test_the_application_served_again_answers_tool_calls(tmp_path: Path) -> None:
    """One application served twice in a process (its lifespan run again): the second
    start failed, the SDK's session manager running once only."""
    from converge_dsl.serve._app import HttpLimits, build_app
    from converge_dsl.serve._mcp import McpEndpoint

    from .conftest import on_a_thread

    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "state"))
    try:
        endpoint = McpEndpoint(prepared.service, None, HttpLimits(), loopback=True)
        app = build_app(prepared.service, None, HttpLimits(), endpoint)
        for _ in range(2):
            with on_a_thread(app) as url:
                assert _echo_status(url) == "done"
    finally:
        prepared.service.store.close()


def test_the_mcp_extras_sse_starlette_is_one_whose_drain_the_server_turns_off() -> None:
    """`serve` turns sse-starlette's drain of every stream at a signal off
    (`disable_automatic_graceful_drain`, from 3.2); 2.x also kept a process-wide
    `should_exit_event`, set on a signal stop and never cleared, so a server started after
    one stopped by a signal answered its tool calls with streams ending early."""
    import tomllib

    from .conftest import ROOT

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    wanted = [r for r in project["optional-dependencies"]["mcp"] if r.startswith("sse-starlette")]
    assert wanted == ["sse-starlette>=3.2"]


def test_the_sdks_transport_lives_only_while_the_application_runs(tmp_path: Path) -> None:
    """No session manager before the lifespan nor after it: a request outside it (uvicorn
    takes none) is the service's 500 (CD445), not an answer of a manager never run."""
    from converge_dsl.serve._app import HttpLimits, build_app
    from converge_dsl.serve._mcp import McpEndpoint

    prepared = prepare(ServeOptions([DATA / "echo.yaml"], state=tmp_path / "s"))
    endpoint = McpEndpoint(prepared.service, None, HttpLimits(), loopback=True)
    app = build_app(prepared.service, None, HttpLimits(), endpoint)

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1") as c:
            return await c.post("/mcp", json=_ECHO_CALL, headers=_ACCEPT)

    async def while_running() -> bool:
        async with endpoint.running():
            return endpoint.sessions is not None

    try:
        assert endpoint.sessions is None
        assert asyncio.run(while_running())
        assert endpoint.sessions is None
        answer = asyncio.run(post())
    finally:
        prepared.service.store.close()
    assert answer.status_code == 500
    assert answer.json()["errors"][0]["code"] == "CD445"
