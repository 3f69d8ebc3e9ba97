"""A tool call whose arguments are not JSON is the model's mistake: a soft tool error, not E_WIRE.

A loopback OpenAI-compatible server (started here on 127.0.0.1) answers the
agent's first turn with a `context.propose` call whose arguments are broken JSON,
as a small model writes them. The agent answers it with an error result naming
the position of the JSON error, counts the turn, and its next turn runs: the
well-formed call that follows is promoted and the run converges. A response the
wire format cannot decode at all is still `E_WIRE`.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run as cli_run

BROKEN = '{"id": "}, ",\n "content": ...'  # as gemma-3-270m on llama.cpp wrote one
GOOD = json.dumps({"id": "ok", "content": "The plan is sound.", "confidence": 0.9})

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: loopback-agent
models:
  remote:
    adapter: openai
    base_url: {base_url}
    model: small
    retries: 0
    accounts: [{{name: main, api_key_env: LOOPBACK_KEY}}]
seeds:
  - {{id: plan, key: strategies, content: "Enter the Nordic market"}}
suggestors:
  - name: reviewer
    kind: agent
    model: remote
    dependencies: [strategies]
    target: evaluations
    goal: Evaluate the strategy.
    max_turns: 4
    tools: [context.read, context.propose, finish]
"""


def _choice(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "cmpl",
        "model": "small",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }


def _call(call_id: str, arguments: str) -> dict[str, Any]:
    function = {"name": "context_propose", "arguments": arguments}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


class _Loopback(ThreadingHTTPServer):
    def __init__(self, answers: list[bytes]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers
        self.bodies: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: _Loopback

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.server.bodies.append(json.loads(body))
        answers = self.server.answers
        payload = answers[min(len(self.server.bodies), len(answers)) - 1]
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        return None


def _serve(answers: list[bytes]) -> Iterator[_Loopback]:
    server = _Loopback(answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def loopback() -> Iterator[_Loopback]:
    yield from _serve(
        [
            json.dumps(_choice(_call("call_1", BROKEN), "tool_calls")).encode(),
            json.dumps(_choice(_call("call_2", GOOD), "tool_calls")).encode(),
            json.dumps(_choice({"role": "assistant", "content": "Done."}, "stop")).encode(),
        ]
    )


def _run(
    server: _Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str, str]:
    monkeypatch.setenv("LOOPBACK_KEY", "sk-loopback")
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.format(base_url=server.base_url), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    argv = ["run", str(pipeline), "--format", "json", "--trace", str(tmp_path / "t.jsonl")]
    code = cli_run(argv, out, err)
    return code, out.getvalue(), err.getvalue()


def _events(path: Path, kind: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    events = [line.get("event", line) for line in lines]
    return [e for e in events if e.get("type") == kind]


def test_arguments_that_are_not_json_get_a_soft_error_and_the_next_turn_runs(
    loopback: _Loopback, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _run(loopback, tmp_path, monkeypatch)
    assert code == 0, err
    result = json.loads(out)
    assert result["stop_reason"] == "converged"
    assert [f["id"] for f in result["facts"]["evaluations"]] == ["ok"]
    assert len(loopback.bodies) == 3  # the turn after the broken call ran, and one more
    answered = loopback.bodies[1]["messages"][-1]
    assert answered["role"] == "tool"
    assert answered["tool_call_id"] == "call_1"
    assert answered["content"] == (
        "ERROR: invalid call of context.propose: the arguments are not valid JSON: "
        "Expecting value: "
        "line 2 column 13 (char 26); call it again with the arguments as one JSON object"
    )
    echoed = loopback.bodies[1]["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    assert echoed == "{}"  # what is sent back is JSON, whatever the model wrote
    called = _events(tmp_path / "t.jsonl", "agent_tool_called")
    assert [(e["turn"], e["tool"], e["is_error"]) for e in called] == [
        (0, "context.propose", True),
        (1, "context.propose", False),
    ]
    finished = _events(tmp_path / "t.jsonl", "agent_finished")
    assert [(e["status"], e["turns"]) for e in finished] == [("completed", 3)]


def test_a_response_the_wire_cannot_decode_stays_e_wire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for server in _serve([b'{"choices": [{"index": 0, "message": "not an object"}]}']):
        code, _, err = _run(server, tmp_path, monkeypatch)
    assert code != 0
    assert "E_WIRE" in err
