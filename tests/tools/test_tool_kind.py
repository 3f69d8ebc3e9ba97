"""A `tool` suggestor calls mcp-server-time's convert_time with arguments rendered from the
context and maps its JSON result to facts as an llm output does; errors become a
diagnostic fact; validate checks its reference without starting a server."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from converge_dsl.cli import run

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: tool-kind
tools:
  time:
    command: [mcp-server-time, --local-timezone, UTC]
    allow: [convert_time]
seeds:
  - {id: meeting, content: "14:30", data: {zone: Europe/Paris}}
suggestors:
  - name: tokyo-time
    kind: tool
    call: mcp:time/convert_time
    dependencies: [seeds]
    arguments:
      source_timezone: "{{ fact('seeds', 'meeting').data.zone }}"
      time: "{{ fact('seeds', 'meeting').content }}"
      target_timezone: Asia/Tokyo
    target: signals
    output:
      id: "tokyo-{{ item.source.datetime[11:16] | replace(':', '') }}"
      content: "{{ item.target.datetime[11:16] }} in Tokyo ({{ item.time_difference }})"
      data: "item.target.timezone"
  - name: bad-zone
    kind: tool
    call: mcp:time/convert_time
    dependencies: [seeds]
    arguments: {source_timezone: Nowhere, time: "10:00", target_timezone: UTC}
    target: signals
"""


def _run(tmp_path: Path, text: str, *argv: str) -> tuple[int, str, str]:
    (tmp_path / "p.yaml").write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = run([argv[0], str(tmp_path / "p.yaml"), *argv[1:]], out, err)
    return code, out.getvalue(), err.getvalue()


def test_a_tool_suggestor_maps_the_result_to_facts(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    cassette = tmp_path / "kind.cassette.jsonl"
    code, out, err = _run(
        tmp_path,
        PIPELINE,
        "run",
        "--format",
        "json",
        "--trace",
        str(trace),
        "--record",
        str(cassette),
    )
    assert code == 0, err
    # Replayed with no server: the same result, the server's command never looked up.
    gone = PIPELINE.replace("[mcp-server-time,", "[no-such-server,")
    again, replayed, err = _run(
        tmp_path, gone, "run", "--format", "json", "--replay", str(cassette)
    )
    assert (again, replayed) == (code, out), err
    text = json.dumps(json.loads(out))
    assert '"id": "tokyo-1430"' in text
    assert "22:30 in Tokyo (+8.0h)" in text
    assert '"data": "Asia/Tokyo"' in text
    assert "tool:error:bad-zone:1" in text
    assert "Invalid timezone" in text
    calls = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [c for c in calls if c["type"] == "mcp_tool_called"]
    assert sorted((c["suggestor"], c["is_error"]) for c in calls) == [
        ("bad-zone", True),
        ("tokyo-time", False),
    ]
    assert {
        "source_timezone": "Europe/Paris",
        "time": "14:30",
        "target_timezone": "Asia/Tokyo",
    } in [c["arguments"] for c in calls]


def test_validate_checks_the_call_without_starting_a_server(tmp_path: Path) -> None:
    broken = PIPELINE.replace("command: [mcp-server-time", "command: [no-such-server").replace(
        "call: mcp:time/convert_time\n    dependencies: [seeds]\n    arguments:\n",
        "call: mcp:time/convert_tme\n    dependencies: [seeds]\n    arguments:\n",
    )
    code, out, err = _run(tmp_path, broken, "validate")
    assert code == 2
    assert "error[CD261]: tool 'convert_tme' is not in the allow-list of server 'time'" in (
        out + err
    )
    assert "did you mean 'convert_time'?" in out + err


def test_a_tool_suggestor_refused_by_max_tool_calls_stops_the_run(tmp_path: Path) -> None:
    from ._counting import calls, cli, folder, running

    pipeline = folder(tmp_path, calls=1)
    code, out, err = cli("run", str(pipeline), "--format", "json")
    assert code == 4, err
    result = json.loads(out)
    assert result["stop_reason"] == "tool_call_budget_exhausted"
    assert [f["id"] for f in result["facts"].get("diagnostic", [])] == []  # no tool:error fact
    assert calls(tmp_path) == 1
    (note,) = result["diagnostics"]
    assert note["code"] == "CD967"
    assert note["message"] == (
        "max_tool_calls 1 reached: 'measure' made 1 tool call; 'measure-again' was refused a "
        "tool call"
    )
    code, _, err = cli("run", str(pipeline))
    expected = Path(__file__).resolve().parent / "data" / "tool_call_budget.expected"
    assert err.replace(str(tmp_path), "DIR") == expected.read_text()
    assert running(str(tmp_path)) == []
    # cached answers count toward no budget: a run that hits twice is within max_tool_calls 1
    cache = str(tmp_path / "cache")
    pipeline.write_text(pipeline.read_text().replace("max_tool_calls: 1", "max_tool_calls: 2"))
    assert cli("run", str(pipeline), "--cache", "--cache-dir", cache)[0] == 0
    pipeline.write_text(pipeline.read_text().replace("max_tool_calls: 2", "max_tool_calls: 1"))
    code, out, err = cli("run", str(pipeline), "--cache", "--cache-dir", cache)
    assert code == 0, err


RAW_CALLER = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: long-error
tools:
  raw:
    command: [{python}, {server}, long-error]
    allow: [echo]
seeds:
  - {{id: s, content: go}}
suggestors:
  - name: caller
    kind: tool
    call: mcp:raw/echo
    dependencies: [seeds]
    arguments: {{}}
    target: signals
"""


def _raw_caller() -> str:
    """RAW_CALLER calling the raw server's `long-error` with this interpreter."""
    server = Path(__file__).resolve().parent / "raw_server.py"
    return RAW_CALLER.format(python=json.dumps(sys.executable), server=json.dumps(str(server)))


def test_a_long_tool_error_is_quoted_cut_not_lost(tmp_path: Path) -> None:
    # The diagnostic quoted the 50,000-character error twice (content and data) and the
    # gate rejected it: the run said only "content and data are 100173 characters".
    text = _raw_caller()
    code, out, err = _run(tmp_path, text, "run", "--format", "json")
    assert code == 0, err
    (fact,) = json.loads(out)["facts"]["diagnostic"]
    assert fact["id"] == "tool:error:caller:1"
    assert fact["content"].startswith("caller (at ")
    assert "mcp:raw/echo failed: no such ticket no such ticket" in fact["content"]
    size = len(str(tmp_path)) + 50057
    assert f"\u2026 [{size - 1000} of {size} characters cut] \u2026" in fact["content"]
    assert len(fact["content"]) < 1100
    assert "\u2026 [49010 of 50010 characters cut] \u2026" in fact["data"]["error"]


def test_a_capped_tool_error_keeps_the_cap_marker_in_its_quote(tmp_path: Path) -> None:
    # The quote kept only the head of an error cut at max_result_bytes: its
    # "[result cut: 50010 bytes ...]" marker was lost, the note said 2,0xx characters.
    text = _raw_caller()
    text = text.replace("allow: [echo]", "allow: [echo]\n    max_result_bytes: 2000")
    code, out, err = _run(tmp_path, text, "run", "--format", "json")
    assert code == 0, err
    (fact,) = json.loads(out)["facts"]["diagnostic"]
    marker = "[result cut: 50010 bytes, over the cap of 2000]"
    assert fact["content"].endswith(marker)
    assert fact["data"]["error"].endswith(marker)


@pytest.mark.parametrize("field", ["start_timeout_s", "call_timeout_s"])
def test_validate_states_the_one_year_cap_of_a_tool_timeout(tmp_path: Path, field: str) -> None:
    # A timeout of 10,000,000,000 s passed validate and was held to a year in silence.
    from converge_dsl.tools._port import LONGEST_WAIT_S

    text = RAW_CALLER.format(python='"python"', server='"server.py"')
    text = text.replace("allow: [echo]", f"allow: [echo]\n    {field}: 10000000000")
    code, out, err = _run(tmp_path, text, "validate")
    assert code == 2
    said = out + err
    assert f"tools.raw.{field} must be <= {LONGEST_WAIT_S:.0f}, not 10000000000" in said
    assert "at most 31536000, a year" in said


def test_a_long_tool_error_fits_a_low_max_content_length(tmp_path: Path) -> None:
    # Under `promotion: {max_content_length: 1500}` the cut diagnostic (2,153 characters
    # of content and data) was rejected again, its message lost.
    text = _raw_caller()
    text += "promotion: {max_content_length: 1500}\n"
    code, out, err = _run(tmp_path, text, "run", "--format", "json")
    assert code == 0, err
    (fact,) = json.loads(out)["facts"]["diagnostic"]
    assert fact["id"] == "tool:error:caller:1"
    assert "mcp:raw/echo failed: no such ticket" in fact["content"]
    assert " of 50010 characters cut] " in fact["data"]["error"]
    from converge_dsl.engine.types import canonical_json

    assert len(fact["content"]) + len(canonical_json(fact["data"])) <= 1500
