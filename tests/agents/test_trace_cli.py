"""`converge-dsl trace expand`: the cleared turns come back from a JSONL trace."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

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
        "error: no cleared span 'rev.c1.r9' in trace.jsonl\n  hint: did you mean 'rev.c1.r1'?\n"
    )


def test_bad_trace_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    out, err = io.StringIO(), io.StringIO()
    assert cli(["trace", "expand", str(bad), "x"], out, err) == 3
    assert "bad.jsonl:1: not a JSON line" in err.getvalue()
    assert cli(["trace", "expand", str(tmp_path / "none.jsonl"), "x"], out, err) == 3
