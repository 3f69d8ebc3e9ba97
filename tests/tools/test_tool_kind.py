"""A `tool` suggestor calls mcp-server-time's convert_time with arguments rendered from the
context and maps its JSON result to facts as an llm output does; errors become a
diagnostic fact; validate checks its reference without starting a server."""

from __future__ import annotations

import io
import json
from pathlib import Path

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
