"""An agent calls MCP tools of real servers in a run: the FastMCP fixture over stdio and
`mcp-server-time`; input checked against the server's schema (a soft error the model
sees), results in the trace, the servers started once and nothing left running."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from converge_dsl.cli import run
from converge_dsl.runtime._trace import deterministic_line

from ._servers import FIXTURE, http_fixture

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: agent-tools
tools:
  fixture:
    command: [{python}, {fixture}, stdio, "0", {marker}]
    allow: [echo, fail]
  time:
    command: [mcp-server-time, --local-timezone, UTC]
    allow: [convert_time]
  web:
    url: {url}
    hosts: [127.0.0.1]
    allow: [echo]
models:
  default: {{adapter: scripted, script: agent.script.yaml}}
budget: {{max_tool_calls: 4}}
seeds: [{{id: task, content: compare the times}}]
suggestors:
  - name: clerk
    kind: agent
    model: default
    dependencies: [seeds]
    target: evaluations
    goal: Convert a time and report.
    tools: [context.propose, finish, "mcp:fixture/*", "mcp:time/convert_time", "mcp:web/echo"]
"""

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {suggestor: clerk, turn: 0}
    tool_calls: [{name: "mcp:fixture/echo", input: {text: echoed-by-fixture}}]
  - match: {suggestor: clerk, turn: 1}
    tool_calls: [{name: "mcp:fixture/echo", input: {words: wrong-field}}]
  - match: {suggestor: clerk, turn: 2}
    tool_calls: [{name: "mcp:fixture/fail", input: {reason: index-down}}]
  - match: {suggestor: clerk, turn: 3}
    tool_calls:
      - name: "mcp:time/convert_time"
        input: {source_timezone: Europe/Paris, time: "14:30", target_timezone: Asia/Tokyo}
  - match: {suggestor: clerk, turn: 4}
    tool_calls: [{name: "mcp:web/echo", input: {text: echoed-over-http}}]
  - match: {suggestor: clerk, turn: 5}
    tool_calls: [{name: "mcp:fixture/echo", input: {text: over-budget}}]
  - match: {suggestor: clerk, turn: 6}
    tool_calls:
      - name: context.propose
        input: {id: tokyo, content: "14:30 in Paris is 22:30 in Tokyo", confidence: 0.9}
  - match: {suggestor: clerk, turn: 7}
    tool_calls: [{name: finish, input: {summary: done}}]
default: {reply: Done.}
"""


def _running_with(marker: str) -> list[int]:
    """Processes whose command line names `marker` (the fixture's, by its argument)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def test_an_agent_calls_mcp_tools_over_stdio_and_http(tmp_path: Path) -> None:
    marker = str(tmp_path / "no-extra-tool")
    out, err = io.StringIO(), io.StringIO()
    trace = tmp_path / "trace.jsonl"
    with http_fixture() as web:
        (tmp_path / "agent.yaml").write_text(
            PIPELINE.format(
                python=json.dumps(sys.executable),
                fixture=json.dumps(str(FIXTURE)),
                marker=marker,
                url=web.url,
            )
        )
        (tmp_path / "agent.script.yaml").write_text(SCRIPT)
        cassette = tmp_path / "agent.cassette.jsonl"
        argv = ["run", str(tmp_path / "agent.yaml"), "--format", "json", "--trace", str(trace)]
        code = run([*argv, "--record", str(cassette)], out, err)
    assert code == 0, err.getvalue()
    recorded = out.getvalue()
    result = json.loads(recorded)
    facts = result["facts"] if "facts" in result else result["context"]
    assert "22:30 in Tokyo" in json.dumps(facts)
    events = trace.read_text()
    assert "echoed-by-fixture" in events
    assert "invalid input for mcp:fixture/echo: at /text: 'text' is a required property" in events
    assert "index-down" in events
    assert '"server":"web","tool":"echo","arguments":{"text":"echoed-over-http"},' in events
    assert '"output":"echoed-over-http","is_error":false' in events
    assert '\\"time_difference\\": \\"+8.0h\\"' in events
    assert "budget.max_tool_calls (4) is spent" in events
    assert "over-budget" not in events.split("is spent")[1]
    assert _running_with(marker) == []

    # Replayed with every server gone: the HTTP one stopped, the stdio ones not found.
    text = (tmp_path / "agent.yaml").read_text()
    text = text.replace(json.dumps(sys.executable), "no-such-python")
    (tmp_path / "agent.yaml").write_text(text.replace("[mcp-server-time,", "[no-such-server,"))
    replayed, err = io.StringIO(), io.StringIO()
    second = tmp_path / "replayed.jsonl"
    argv = ["run", str(tmp_path / "agent.yaml"), "--format", "json", "--trace", str(second)]
    assert run([*argv, "--replay", str(cassette)], replayed, err) == 0, err.getvalue()
    assert replayed.getvalue() == recorded

    def lines(path: Path) -> list[dict[str, object]]:
        return [deterministic_line(json.loads(x)) for x in path.read_text().splitlines()]

    assert lines(second) == lines(trace)
