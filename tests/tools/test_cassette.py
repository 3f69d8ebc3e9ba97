"""Cassettes hold tool calls: a run with an agent using MCP tools of real servers (the
FastMCP fixture over stdio and streamable HTTP, `mcp-server-time`) and `tool` suggestors
is recorded, the servers stop, and `--replay` runs it again with every server's command
replaced by a program that does not exist and the HTTP server gone: the JSON result is
byte-identical and so is the trace (clock readings aside); a call the cassette lacks is
a located error (CD968); nothing is left running."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

from converge_dsl.cli import run
from converge_dsl.runtime._trace import deterministic_line

from ._servers import FIXTURE, http_fixture
from .test_agent_tools import _running_with

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: replayed-tools
tools:
  fixture:
    command: [{python}, {fixture}, stdio, "0", {marker}]
    allow: [echo, fail, crash]
  time:
    command: [mcp-server-time, --local-timezone, UTC]
    allow: [convert_time]
  web:
    url: {url}
    hosts: [127.0.0.1]
    allow: [echo]
models:
  default: {{adapter: scripted, script: agent.script.yaml}}
budget: {{max_tool_calls: 8}}
seeds:
  - {{id: meeting, content: "14:30", data: {{zone: Europe/Paris}}}}
suggestors:
  - name: tokyo-time
    kind: tool
    call: mcp:time/convert_time
    dependencies: [seeds]
    arguments:
      source_timezone: "{{{{ fact('seeds', 'meeting').data.zone }}}}"
      time: "{{{{ fact('seeds', 'meeting').content }}}}"
      target_timezone: Asia/Tokyo
    target: signals
    output:
      id: "tokyo-{{{{ item.source.datetime[11:16] | replace(':', '') }}}}"
      content: "{{{{ item.target.datetime[11:16] }}}} in Tokyo"
  - name: shout
    kind: tool
    call: mcp:fixture/echo
    dependencies: [seeds]
    arguments: {{text: '{{"id": "loud", "content": "{{{{ facts.seeds[0].content }}}}"}}'}}
    target: hypotheses
  - name: clerk
    kind: agent
    model: default
    dependencies: [signals]
    target: evaluations
    goal: Check the converted time.
    tools: [context.read, context.propose, finish, "mcp:fixture/*", "mcp:web/echo"]
"""

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {suggestor: clerk, turn: 0}
    tool_calls: [{name: "mcp:fixture/echo", input: {text: first-look}}]
  - match: {suggestor: clerk, turn: 1}
    tool_calls: [{name: "mcp:fixture/fail", input: {reason: index-down}}]
  - match: {suggestor: clerk, turn: 2}
    tool_calls: [{name: "mcp:web/echo", input: {text: over-http}}]
  - match: {suggestor: clerk, turn: 3}
    tool_calls: [{name: "mcp:fixture/echo", input: {text: first-look}}]
  - match: {suggestor: clerk, turn: 4}
    tool_calls: [{name: "mcp:fixture/crash", input: {}}]
  - match: {suggestor: clerk, turn: 5}
    tool_calls:
      - name: context.propose
        input: {id: checked, content: "22:30 in Tokyo holds", confidence: 0.9}
  - match: {suggestor: clerk, turn: 6}
    tool_calls: [{name: finish, input: {summary: done}}]
default: {reply: Done.}
"""


def _cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def _trace(path: Path) -> list[dict[str, object]]:
    return [deterministic_line(json.loads(line)) for line in path.read_text().splitlines()]


def _write(tmp_path: Path, marker: str, url: str, python: str, time_command: str) -> Path:
    text = PIPELINE.format(
        python=json.dumps(python), fixture=json.dumps(str(FIXTURE)), marker=marker, url=url
    ).replace("command: [mcp-server-time,", f"command: [{time_command},")
    pipeline = tmp_path / "tools.yaml"
    pipeline.write_text(text)
    (tmp_path / "agent.script.yaml").write_text(SCRIPT)
    return pipeline


def test_a_run_with_tools_replays_byte_identically_with_no_server(tmp_path: Path) -> None:
    marker = str(tmp_path / "no-extra-tool")
    cassette, first, second = (
        tmp_path / "run.cassette.jsonl",
        tmp_path / "recorded.jsonl",
        tmp_path / "replayed.jsonl",
    )
    with http_fixture() as web:
        pipeline = _write(tmp_path, marker, web.url, sys.executable, "mcp-server-time")
        code, recorded, err = _cli(
            "run", pipeline, "--format", "json", "--record", cassette, "--trace", first
        )
        url = web.url
    assert code == 0, err
    assert _running_with(marker) == []
    text = json.dumps(json.loads(recorded))
    assert "22:30 in Tokyo" in text
    assert '"loud"' in text
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    tool_lines = [line for line in lines if line.get("kind") == "mcp"]
    starts = sorted(line["request"]["server"] for line in tool_lines if "info" in line)
    assert starts == ["fixture", "time", "web"]
    assert any(line.get("failure", {}).get("code") == "CD965" for line in tool_lines)

    # The servers are gone: no such program, and nothing listens at the url.
    missing = str(tmp_path / "no-such-program")
    pipeline = _write(tmp_path, marker, url, missing, "no-such-mcp-server")
    code2, replayed, err2 = _cli(
        "run", pipeline, "--format", "json", "--replay", cassette, "--trace", second
    )
    assert code2 == code, err2
    assert replayed == recorded
    assert _trace(second) == _trace(first)
    events = [e for e in _trace(second) if e["type"] == "mcp_tool_called"]
    assert len(events) == 7
    assert _running_with(marker) == []


def test_a_call_the_cassette_lacks_is_a_located_error(tmp_path: Path) -> None:
    marker = str(tmp_path / "no-extra-tool")
    cassette = tmp_path / "run.cassette.jsonl"
    with http_fixture() as web:
        pipeline = _write(tmp_path, marker, web.url, sys.executable, "mcp-server-time")
        code, _, err = _cli("run", pipeline, "--format", "json", "--record", cassette)
        url = web.url
    assert code == 0, err
    changed = tmp_path / "changed"
    changed.mkdir()
    pipeline = _write(changed, marker, url, "no-such-program", "no-such-mcp-server")
    seoul = pipeline.read_text().replace("zone: Asia/Tokyo", "zone: Asia/Seoul")
    pipeline.write_text(seoul)
    code, out, err = _cli("run", pipeline, "--format", "json", "--replay", cassette)
    assert code == 1
    (diagnostic,) = json.loads(out)["diagnostics"]
    assert diagnostic["code"] == "CD968"
    assert diagnostic["suggestor"] == "tokyo-time"
    assert diagnostic["path"] == "suggestors[0]"
    message = diagnostic["message"]
    assert "no recorded answer in cassette run.cassette.jsonl for the tool call" in message
    assert "server 'time', tool 'convert_time'" in message
    assert "nearest recorded call: line " in message
    assert "differs at arguments.target_timezone" in message
    assert "error[CD968]" in err


def test_a_tool_line_that_is_not_a_recording_is_refused_before_the_run(tmp_path: Path) -> None:
    pipeline = _write(tmp_path, "m", "http://127.0.0.1:1/mcp", "no-such-program", "nope")
    cassette = tmp_path / "run.cassette.jsonl"
    line = {"v": 2, "kind": "mcp", "key": "k", "request": {"server": "time", "op": "call"}}
    cassette.write_text("\n\n" + json.dumps(line) + "\n")
    code, out, err = _cli("run", pipeline, "--replay", cassette)
    assert code == 3
    assert out == ""
    assert err == (
        "error[CD969]: --replay " + str(cassette) + ": cassette run.cassette.jsonl line 3 "
        "is not a tool recording: it holds neither an answer nor a failure\n"
        "  hint: record the cassette again (`--record CASSETTE`); do not edit it by hand\n"
    )


def test_a_tool_line_without_a_field_names_the_field(tmp_path: Path) -> None:
    # It read "is not a tool recording: 'request'", the bare key of a KeyError.
    pipeline = _write(tmp_path, "m", "http://127.0.0.1:1/mcp", "no-such-program", "nope")
    cassette = tmp_path / "run.cassette.jsonl"
    cassette.write_text(json.dumps({"v": 2, "kind": "mcp", "key": "k"}) + "\n")
    code, _, err = _cli("run", pipeline, "--replay", cassette)
    assert code == 3
    assert "line 1 is not a tool recording: it has no field 'request'\n" in err


def test_a_cassette_line_that_is_not_an_object_is_refused_naming_it(tmp_path: Path) -> None:
    # It was skipped without a word, and the replay then said it had no start of the server.
    pipeline = _write(tmp_path, "m", "http://127.0.0.1:1/mcp", "no-such-program", "nope")
    cassette = tmp_path / "run.cassette.jsonl"
    cassette.write_text("[1, 2]\n")
    code, _, err = _cli("run", pipeline, "--replay", cassette)
    assert code == 3
    assert "cassette run.cassette.jsonl line 1 is not a tool recording: not a JSON object\n" in err
