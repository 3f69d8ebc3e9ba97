"""Human in the loop through the CLI: exit 6, pending proposals, --resume with decisions."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from converge_dsl.cli import run

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
promotion: {gated_keys: [strategies]}
seeds: [{id: a, content: x}]
suggestors:
  - name: plan
    kind: rule
    when: "true"
    emit:
      - {key: strategies, id: s1, content: "go big"}
      - {key: strategies, id: s2, content: "go small", confidence: 0.9}
  - name: review
    kind: rule
    dependencies: [strategies]
    emit: [{key: evaluations, id: "e-{{ count('strategies') }}", content: reviewed}]
"""


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")
    return path


def _paused(pipeline: Path, ckpt: Path) -> dict[str, object]:
    code, out, err = cli("run", pipeline, "--checkpoint", ckpt, "--format", "json")
    assert code == 6
    assert f"--resume {ckpt}" in err
    doc: dict[str, object] = json.loads(out)
    return doc


def test_pause_exits_6_and_lists_pending_in_json(pipeline: Path, tmp_path: Path) -> None:
    doc = _paused(pipeline, tmp_path / "ck")
    assert doc["stop_reason"] == "hitl_pause"
    assert doc["pending"] == [
        {
            "id": "s1",
            "key": "strategies",
            "content": "go big",
            "data": None,
            "confidence": 1.0,
            "provenance": {"source": "plan@t", "model_id": None, "account": None},
            "suggestor": "plan",
            "cycle": 1,
            "reason": "key 'strategies' is gated",
        },
        {
            "id": "s2",
            "key": "strategies",
            "content": "go small",
            "data": None,
            "confidence": 0.9,
            "provenance": {"source": "plan@t", "model_id": None, "account": None},
            "suggestor": "plan",
            "cycle": 1,
            "reason": "key 'strategies' is gated",
        },
    ]


def test_pause_human_output_and_hint_without_checkpoint(pipeline: Path) -> None:
    code, out, err = cli("run", pipeline)
    assert code == 6
    assert "awaiting a human decision (2)" in out
    assert "  - s2 [strategies]: go small\n" in out
    assert "confidence 0.90  from plan (cycle 1)  gated: key 'strategies' is gated" in out
    assert "stop: hitl_pause" in out
    assert "no --checkpoint was given" in err
    assert "--checkpoint DIR" in err


def test_approve_and_reject_continue_to_convergence(pipeline: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    _paused(pipeline, ckpt)
    code, out, _ = cli(
        "run", pipeline, "--resume", ckpt, "--approve", "s1", "--reject", "s2", "--format", "json"
    )
    doc = json.loads(out)
    assert code == 0, doc
    # `plan` proposes s2 again every cycle: a rejected id is dropped silently.
    assert [f["id"] for f in doc["facts"]["strategies"]] == ["s1"]
    assert "diagnostic" not in doc["facts"]
    assert "pending" not in doc
    assert [f["id"] for f in doc["facts"]["evaluations"]] == ["e-1"]


def test_decisions_file(pipeline: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    _paused(pipeline, ckpt)
    decisions = tmp_path / "d.json"
    decisions.write_text(json.dumps({"s1": True, "s2": True}))
    code, out, _ = cli(
        "run", pipeline, "--resume", ckpt, "--decisions", decisions, "--format", "json"
    )
    assert code == 0
    assert [f["id"] for f in json.loads(out)["facts"]["strategies"]] == ["s1", "s2"]


def test_undecided_ids_keep_the_run_paused(pipeline: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    _paused(pipeline, ckpt)
    code, out, _ = cli("run", pipeline, "--resume", ckpt, "--approve", "s1", "--format", "json")
    assert code == 6
    assert [p["id"] for p in json.loads(out)["pending"]] == ["s2"]
    # the earlier decision is kept: deciding the rest continues the run
    code, out, _ = cli("run", pipeline, "--resume", ckpt, "--reject", "s2", "--format", "json")
    assert code == 0
    assert [f["id"] for f in json.loads(out)["facts"]["strategies"]] == ["s1"]


def test_unknown_id_is_a_usage_error_with_did_you_mean(pipeline: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    _paused(pipeline, ckpt)
    code, _, err = cli("run", pipeline, "--resume", ckpt, "--approve", "s11")
    assert code == 3
    assert "no pending proposal has id 's11'" in err
    assert "did you mean 's1'?" in err


def test_decisions_need_resume(pipeline: Path) -> None:
    code, _, err = cli("run", pipeline, "--approve", "s1")
    assert code == 3
    assert "--resume DIR" in err
