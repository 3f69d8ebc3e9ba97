"""Fact data survives a pause for a human, the checkpoint, the resume, and a record/replay run.

The pipelines give data through an object `content` (read as data, with its
JSON as text) because that is what the language compiles on this branch;
`seeds[].data` and rule `emit[].data` compile in another part of this work.
"""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

from converge_dsl.cli import run

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
promotion: {gated_keys: [strategies]}
seeds: [{id: a, content: {queue: billing, urgency: 2}}]
suggestors:
  - name: plan
    kind: rule
    when: "true"
    emit:
      - {key: strategies, id: s1, content: {route: "{{ count('seeds') }}", tags: [a, b], ok: true}}
  - name: review
    kind: rule
    dependencies: [strategies]
    emit: [{key: evaluations, id: "e-{{ count('strategies') }}", content: reviewed}]
"""


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(PIPELINE), encoding="utf-8")
    return path


def _data(doc: dict[str, Any], key: str, fid: str) -> Any:
    return next(f["data"] for f in doc["facts"][key] if f["id"] == fid)


def test_pending_data_is_kept_through_pause_checkpoint_and_resume(tmp_path: Path) -> None:
    pipeline, ckpt = _write(tmp_path), tmp_path / "ck"
    code, out, _ = cli("run", pipeline, "--checkpoint", ckpt, "--format", "json")
    assert code == 6
    paused = json.loads(out)
    (pending,) = paused["pending"]
    expected = {"ok": True, "route": "1", "tags": ["a", "b"]}
    assert (pending["id"], pending["data"]) == ("s1", expected)
    assert _data(paused, "seeds", "a") == {"queue": "billing", "urgency": 2}

    code, out, _ = cli("run", pipeline, "--resume", ckpt, "--approve", "s1", "--format", "json")
    assert code == 0
    done = json.loads(out)
    assert _data(done, "strategies", "s1") == expected
    assert _data(done, "seeds", "a") == {"queue": "billing", "urgency": 2}
    assert _data(done, "evaluations", "e-1") is None


def test_the_human_output_of_a_pause_shows_pending_data(tmp_path: Path) -> None:
    code, out, _ = cli("run", _write(tmp_path), "--checkpoint", tmp_path / "ck")
    assert code == 6
    assert (
        "  - s1 [strategies]: "
        '{"ok":true,"route":"1","tags":["a","b"]}\n'
        '    data {"ok":true,"route":"1","tags":["a","b"]}\n'
    ) in out


def test_a_replayed_run_gives_the_same_data(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    pipeline = root / "pipelines" / "staffing-plan.yaml"
    cassette = tmp_path / "run.jsonl"
    code, recorded, err = cli("run", pipeline, "--record", cassette, "--format", "json")
    assert code == 0, err
    code, replayed, err = cli("run", pipeline, "--replay", cassette, "--format", "json")
    assert code == 0, err
    assert replayed == recorded
    plan = _data(json.loads(replayed), "assignments", "staffing-plan")
    assert plan["plan"]["total_cost"] == 9


def test_the_trace_carries_data_on_promoted_and_pending_facts(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    code, _, _ = cli("run", _write(tmp_path), "--trace", trace, "--format", "json")
    assert code == 6
    lines = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    promoted = {e["id"]: e for e in lines if e["type"] == "fact_promoted"}
    (pending,) = [e for e in lines if e["type"] == "proposal_pending"]
    assert promoted["a"]["data"] == {"queue": "billing", "urgency": 2}
    assert pending["data"] == {"ok": True, "route": "1", "tags": ["a", "b"]}
