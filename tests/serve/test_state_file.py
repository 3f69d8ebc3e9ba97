"""A state folder deleted or replaced while serving: writes refused, /healthz failing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx

from converge_dsl.serve._app import HttpLimits
from converge_dsl.serve._state_file import StateFile

from .conftest import DATA, Server, in_process, serve_with_token


def test_a_state_folder_deleted_while_serving_refuses_writes(tmp_path: Path) -> None:
    """Over HTTP: runs were taken into the deleted database (SQLite writes on to an open
    file) and /healthz said ok; now each write is a 503 (CD993) and /healthz too, while
    what the process holds can still be read."""
    state = tmp_path / "state"
    body = {"inputs": {"text": "a"}}
    with in_process(state, HttpLimits()) as url, httpx.Client(base_url=url, timeout=30) as c:
        run = c.post("/v1/pipelines/echo/runs?wait=true", json=body).json()["id"]
        assert c.get("/healthz").status_code == 200
        shutil.rmtree(state)
        for answer in (
            c.post("/v1/pipelines/echo/runs?wait=true", json=body),
            c.delete(f"/v1/runs/{run}"),
            c.get("/healthz"),
        ):
            assert answer.status_code == 503, answer.text
            (problem,) = answer.json()["errors"]
            assert problem["code"] == "CD993"
            assert problem["message"].startswith(
                "the service's state database was deleted while the service runs"
            )
            assert answer.headers["retry-after"] == "30"
        assert c.get(f"/v1/runs/{run}").json()["status"] == "done"


def test_a_run_the_server_does_not_hold_is_503_while_the_state_is_gone(tmp_path: Path) -> None:
    """With the state folder deleted, a run id the database the server holds does not have
    may be in the folder's new one: each lookup of it (the run, its events, its report, a
    decision, a cancel) is 503 (CD993) naming it, not 404. A run it holds is still
    answered, an id of the wrong form is still 404, and a malformed decision still 422."""
    state = tmp_path / "state"
    body = {"inputs": {"text": "a"}}
    unknown = "f" * 32
    with in_process(state, HttpLimits()) as url, httpx.Client(base_url=url, timeout=30) as c:
        run = c.post("/v1/pipelines/echo/runs?wait=true", json=body).json()["id"]
        assert c.get(f"/v1/runs/{unknown}").status_code == 404
        shutil.rmtree(state)
        for answer in (
            c.get(f"/v1/runs/{unknown}"),
            c.get(f"/v1/runs/{unknown}/events"),
            c.get(f"/v1/runs/{unknown}/report"),
            c.post(f"/v1/runs/{unknown}/decisions", json={"approve": ["s1"]}),
            c.delete(f"/v1/runs/{unknown}"),
        ):
            assert answer.status_code == 503, answer.text
            (problem,) = answer.json()["errors"]
            assert problem["code"] == "CD993"
            assert f"cannot tell whether run '{unknown}' exists" in problem["message"]
            assert answer.headers["retry-after"] == "30"
        assert c.get(f"/v1/runs/{run}").json()["status"] == "done"
        assert c.get("/v1/runs/not-a-run").status_code == 404
        answer = c.post(f"/v1/runs/{unknown}/decisions", json={"approve": 3})
        assert answer.status_code == 422, answer.text


def test_a_replaced_state_file_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    path.write_text("a")
    state = StateFile(path)
    assert state.problem() is None
    replaced = tmp_path / "other"
    replaced.write_text("b")
    replaced.replace(path)
    assert state.problem() == "was replaced by another file while the service runs"


def _tool_call(http: httpx.Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The result of an MCP tools/call posted to `/mcp`."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    message["params"] = {"name": name, "arguments": arguments}
    accept = {"Accept": "application/json, text/event-stream"}
    answer = http.post("/mcp", json=message, headers=accept)
    assert answer.status_code == 200, answer.text
    assert "data: " in answer.text, (answer.headers, answer.text)
    result: dict[str, Any] = json.loads(answer.text.split("data: ", 1)[1])["result"]
    return result


def test_mcp_tools_that_write_refuse_a_deleted_state(tmp_path: Path) -> None:
    """`serve --mcp` with the state folder deleted: a pipeline's tool, decideRun and
    cancelRun are tool errors of the 503 (CD993), as the HTTP routes are; they ran and
    stored into the deleted database (lost at the next start). The check is where the
    state is written, so a path no route takes is still 404 and a method a route does
    not take 405."""
    state = tmp_path / "state"
    paths = (DATA / "echo.yaml", DATA / "gated.yaml")
    with (
        in_process(state, HttpLimits(), mcp=True, paths=paths) as url,
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        paused = http.post("/v1/pipelines/gated/runs?wait=true").json()
        assert paused["status"] == "paused"
        shutil.rmtree(state)
        calls = {
            "echo": _tool_call(http, "echo", {"text": "a"}),
            "decideRun": _tool_call(http, "decideRun", {"run": paused["id"], "approve": ["s1"]}),
            "cancelRun": _tool_call(http, "cancelRun", {"run": paused["id"]}),
        }
        for name, result in calls.items():
            assert result["isError"] is True, name
            body = json.loads(result["content"][0]["text"])
            assert (body["status"], body["errors"][0]["code"]) == (503, "CD993"), name
        assert http.get(f"/v1/runs/{paused['id']}").json()["status"] == "paused"
        assert http.post("/v1/pipelines").status_code == 405
        assert http.post("/v1/nothing").status_code == 404
        assert http.get("/healthz").status_code == 503


def test_mcp_refuses_every_call_while_the_token_file_is_gone(
    tmp_path: Path, servers: list[Server]
) -> None:
    """`serve --mcp` with its token file deleted: /mcp lets no call in (503, CD461)."""
    token = "5e7b1d4a9f8e2c6b3a1d0f9e8cc0ffee"
    url = serve_with_token(tmp_path, servers, [DATA / "echo.yaml"], token, "--mcp").ready()
    (tmp_path / "tokens").unlink()
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    message["params"] = {"name": "echo", "arguments": {"text": "a"}}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    answer = httpx.post(f"{url}/mcp", json=message, headers=headers, timeout=30)
    assert answer.status_code == 503, answer.text
    assert answer.json()["errors"][0]["code"] == "CD461"
    assert answer.headers["retry-after"] == "5"
