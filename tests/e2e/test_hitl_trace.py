"""Human decisions in the trace and the report: a paused run, then resumed with decisions.

The resumed run's trace holds one `proposal_decided` per pending proposal (it
fits `trace-event.v1` and is deterministic but for the clock fields); the
report of either trace shows every held proposal with its decision, apart
from the gate's rejections.
"""

from __future__ import annotations

import io
import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from converge_dsl.cli import run
from converge_dsl.runtime._report_data import report_data
from converge_dsl.runtime._trace import deterministic_line

ROOT = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((ROOT / "schemas" / "trace-event.v1.json").read_text(encoding="utf-8"))
)

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
promotion: {gated_keys: [strategies], min_confidence: 0.5}
seeds: [{id: a, content: x}]
suggestors:
  - name: plan
    kind: rule
    when: "true"
    emit:
      - {key: strategies, id: s1, content: "go big"}
      - {key: strategies, id: s2, content: "go small", confidence: 0.9}
      - {key: hypotheses, id: weak, content: "perhaps", confidence: 0.2}
"""


def cli(*argv: str | Path) -> int:
    return run([str(a) for a in argv], io.StringIO(), io.StringIO())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def paused(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(pipeline, checkpoint folder, the paused run's trace)."""
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")
    ckpt, trace = tmp_path / "ck", tmp_path / "paused.jsonl"
    assert cli("run", pipeline, "--checkpoint", ckpt, "--trace", trace) == 6
    return pipeline, ckpt, trace


def _resume(pipeline: Path, ckpt: Path, trace: Path) -> list[dict[str, Any]]:
    code = cli("run", pipeline, "--resume", ckpt, "--approve", "s1", "--reject", "s2",
               "--trace", trace)  # fmt: skip
    assert code == 0
    return _lines(trace)


def test_the_resumed_trace_holds_each_decision_and_fits_the_schema(
    paused: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    pipeline, ckpt, _ = paused
    copy = tmp_path / "ck2"
    shutil.copytree(ckpt, copy)
    first = _resume(pipeline, ckpt, tmp_path / "a.jsonl")
    second = _resume(pipeline, copy, tmp_path / "b.jsonl")
    for line in first:
        assert not list(VALIDATOR.iter_errors(line)), line
    decided = [x for x in first if x["type"] == "proposal_decided"]
    assert [(x["id"], x["key"], x["suggestor"], x["cycle"], x["decision"]) for x in decided] == [
        ("s1", "strategies", "plan", 1, "approved"),
        ("s2", "strategies", "plan", 1, "rejected"),
    ]
    assert decided[0]["reason"] == "key 'strategies' is gated"
    assert decided[0]["span"]["file"].endswith("p.yaml")
    assert decided[0]["time"]
    assert decided[0]["timing"]["at"] >= 0
    assert [deterministic_line(x) for x in first] == [deterministic_line(x) for x in second]


def test_the_report_shows_pending_then_decided_proposals_apart_from_the_gate(
    paused: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    pipeline, ckpt, trace = paused
    before = report_data(trace)
    assert [row[2:] for row in before["hitl"]] == [
        ["strategies", "s1", "key 'strategies' is gated", "pending"],
        ["strategies", "s2", "key 'strategies' is gated", "pending"],
    ]
    assert [row[3] for row in before["rej"]] == ["weak"]  # the gate's, not a human's
    resumed = tmp_path / "resumed.jsonl"
    _resume(pipeline, ckpt, resumed)
    after = report_data(resumed)
    plan = after["names"].index("plan")
    assert after["hitl"] == [
        [1, plan, "strategies", "s1", "key 'strategies' is gated", "approved"],
        [1, plan, "strategies", "s2", "key 'strategies' is gated", "rejected"],
    ]
    # both traces together (the paused run's, then the resumed one's) keep one row per id
    both = tmp_path / "both.jsonl"
    both.write_text(trace.read_text() + resumed.read_text(), encoding="utf-8")
    assert [row[5] for row in report_data(both)["hitl"]] == ["approved", "rejected"]


def test_a_resume_that_stays_paused_lists_the_pending_proposals(
    paused: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    pipeline, ckpt, _ = paused
    trace = tmp_path / "still.jsonl"
    assert cli("run", pipeline, "--resume", ckpt, "--approve", "s1", "--trace", trace) == 6
    lines = _lines(trace)
    assert not [x for x in lines if x["type"] == "proposal_decided"]  # not applied yet
    assert [row[3] for row in report_data(trace)["hitl"]] == ["s1", "s2"]


def test_a_human_gated_fact_of_an_older_trace_counts_as_approved(tmp_path: Path) -> None:
    trace = tmp_path / "old.jsonl"
    fact = {"seq": 0, "type": "fact_promoted", "cycle": 2, "suggestor": "plan", "key": "k",
            "id": "f", "gate": "human", "logical_time": 1}  # fmt: skip
    trace.write_text(json.dumps(fact) + "\n", encoding="utf-8")
    data = report_data(trace)
    assert data["hitl"] == [[2, 0, "k", "f", "", "approved"]]


def test_an_unknown_decision_is_a_located_error(tmp_path: Path) -> None:
    trace = tmp_path / "bad.jsonl"
    event = {"seq": 0, "type": "proposal_decided", "cycle": 1, "suggestor": "plan", "key": "k",
             "id": "f", "decision": "maybe", "reason": "r"}  # fmt: skip
    trace.write_text(json.dumps(event) + "\n", encoding="utf-8")
    code = run(["report", str(trace)], io.StringIO(), err := io.StringIO())
    assert code == 3
    assert "bad.jsonl:1: malformed proposal_decided event (unknown decision 'maybe')" in (
        err.getvalue()
    )
