"""The example agent pipeline runs offline on its model script, end to end through the CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path

from converge_dsl.cli import run as cli

PIPELINE = Path(__file__).parents[2] / "pipelines" / "agent-review.yaml"


def test_agent_review_runs_offline_and_its_cleared_turns_expand(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    out, err = io.StringIO(), io.StringIO()
    code = cli(["run", str(PIPELINE), "--trace", str(trace)], out, err)
    assert code == 0, err.getvalue()
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    by_type: dict[str, list[dict[str, object]]] = {}
    for event in events:
        by_type.setdefault(str(event["type"]), []).append(event)
    fired = {(e["contributor"], e["persist"]) for e in by_type["agent_contributor_fired"]}
    assert fired == {("constraints", False), ("remind-goal", True)}
    assert [e["replacement"] for e in by_type["agent_compaction"]] == ["summary"]
    taken = by_type["agent_summary_taken"][0]
    assert taken["model_id"] == "scripted:agent-review.script.yaml"
    assert taken["prompt_version"] == "summary-v1"
    assert len(str(taken["sha256"])) == 64
    assert by_type["agent_finished"][0]["status"] == "finished"
    assert "Feasible: partners keep hires under 5" in out.getvalue()
    out = io.StringIO()
    assert cli(["trace", "expand", str(trace), str(taken["reduction_id"])], out, err) == 0
    assert "--- turn 0\n[assistant] -> context.read" in out.getvalue()
