"""`converge-dsl trace expand`: the cleared turns come back from a JSONL trace."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import Recorder, compile_agents, fact, run, scripted

from converge_dsl.cli import run as cli

EXPECTED = Path(__file__).parent / "expected"


def trace_file(tmp_path: Path) -> Path:
    script = """
rules:
  - match: {turn: 0}
    reply: "Looking at the seeds."
    tool_calls: [{id: c0, name: context.read, input: {key: seeds}}]
  - match: {turn: 1}
    tool_calls: [{id: c1, name: context.reed, input: {key: seeds}}]
default:
  tool_calls: [{id: cn, name: context.read, input: {key: seeds}}]
"""
    model = scripted(script)
    sink = Recorder()
    agents = compile_agents(
        """
  - name: rev
    kind: agent
    model: main
    target: evaluations
    goal: Review
    max_turns: 5
    context_window: 400
""",
        {"main": model, "cheap": model},
        sink=sink,
    )
    run(agents["rev"], fact("seeds", "s1", "x" * 150))
    path = tmp_path / "trace.jsonl"
    lines = [json.dumps({"seq": i, **e.model_dump(mode="json")}) for i, e in enumerate(sink.events)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_expand_prints_the_cleared_turns(tmp_path: Path) -> None:
    path = trace_file(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "rev.c1.r1"], out, err) == 0, err.getvalue()
    assert out.getvalue() == (EXPECTED / "trace_expand.txt").read_text()


def test_expand_json_gives_the_messages(tmp_path: Path) -> None:
    path = trace_file(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "rev.c1.r1", "--format", "json"], out, err) == 0
    turns = json.loads(out.getvalue())
    assert [t["turn"] for t in turns] == [0, 1]
    assert turns[0]["messages"][0]["parts"][0] == {"type": "text", "text": "Looking at the seeds."}


def test_unknown_reduction_suggests_the_nearest(tmp_path: Path) -> None:
    path = trace_file(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "rev.c1.r9"], out, err) == 1
    assert err.getvalue() == (
        "error[CD333]: no cleared span 'rev.c1.r9' in trace.jsonl\n"
        "  hint: did you mean 'rev.c1.r1'?\n"
    )


def test_bad_trace_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(bad), "x"], out, err) == 3
    assert "bad.jsonl:1: not a JSON line" in err.getvalue()
    assert cli(["trace", "expand", str(tmp_path / "none.jsonl"), "x"], out, err) == 3


SPAN = {
    "seq": 1,
    "type": "agent_span_cleared",
    "suggestor": "r",
    "cycle": 1,
    "reduction_id": "r.c1.r1",
    "first_turn": 0,
    "last_turn": 2,
    "turns": [
        {"turn": 0, "messages": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    ],
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"turns": 5}, "turns: Input should be a valid list"),
        ({"turns": [1]}, "turns.0: Input should be a valid dictionary"),
        ({"turns": [{"turn": 0, "messages": [{"role": "user", "parts": 5}]}]}, "parts"),
        ({"turns": [{"turn": 0, "messages": [{"role": "u", "parts": [{"type": "x"}]}]}]}, "type"),
        ({"first_turn": "zero"}, "first_turn"),
    ],
)
@pytest.mark.parametrize("fmt", ["human", "json"])
def test_malformed_span_event_names_its_line(
    tmp_path: Path, change: dict[str, object], problem: str, fmt: str
) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text("\n" + json.dumps({**SPAN, **change}) + "\n")
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "r.c1.r1", "--format", fmt], out, err) == 3
    malformed = f"error[CD335]: {path}:2: malformed agent_span_cleared event ("
    assert err.getvalue().startswith(malformed)
    assert problem in err.getvalue()
    if fmt == "human":
        assert out.getvalue() == ""
    else:  # the command line's one JSON error object, as every command's
        message = json.loads(out.getvalue())["error"]["message"]
        assert err.getvalue().startswith(f"error[CD335]: {message}\n")


def test_well_formed_span_event_still_expands(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(SPAN) + "\n")
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "r.c1.r1"], out, err) == 0, err.getvalue()
    assert "[user] hi" in out.getvalue()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            b'{"seq": 0}\n' + bytes(range(128, 256)) + b"\n",
            ":2: not UTF-8 text (byte 0 of the line)",
        ),
        (b"[" * 100_000 + b"\n", ":1: JSON nested too deeply"),
    ],
)
def test_unreadable_trace_lines_are_usage_errors(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "g.jsonl"
    path.write_bytes(content)
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "x"], out, err) == 3
    assert err.getvalue().startswith(f"error[CD335]: {path}{problem}")


def _hostile(path: Path, tmp_path: Path) -> Path:
    """`path` with a reduction id and a message text full of terminal controls."""
    events = [json.loads(line) for line in path.read_text().splitlines()]
    for event in events:
        if event["type"] == "agent_span_cleared":
            event["turns"][0]["messages"][0]["parts"][0]["text"] = (
                "\x1b[2J\x1b]0;title\x07wiped\r\x1b[31mred\u202eevil"
            )
    cleared = next(e for e in events if e["type"] == "agent_span_cleared")
    events.append({**cleared, "reduction_id": "\x1b[31mr2\x9b2J"})
    hostile = tmp_path / "hostile.jsonl"
    hostile.write_text("".join(json.dumps(e) + "\n" for e in events))
    return hostile


def test_expand_escapes_terminal_controls_from_the_trace(tmp_path: Path) -> None:
    path = _hostile(trace_file(tmp_path), tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "rev.c1.r1"], out, err) == 0, err.getvalue()
    assert out.getvalue() == (EXPECTED / "trace_expand_hostile.txt").read_text()


def test_errors_escape_terminal_controls_from_the_trace(tmp_path: Path) -> None:
    path = _hostile(trace_file(tmp_path), tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(path), "zz"], out, err) == 1
    assert err.getvalue() == (EXPECTED / "trace_expand_hostile_error.txt").read_text()
