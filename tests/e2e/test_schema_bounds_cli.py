"""The audit's two schema cases end with a located diagnostic, never a hang or a traceback.

(a) a key schema with 100,000 properties: `validate` and `run` refuse it (CD130) at its
`properties`; one that reaches run time through a pack's input schema is a run error
before any data is checked. (b) 40,000 mixed integers and strings under `uniqueItems`
are checked in linear time and promoted; the same answer checked against 100 `anyOf`
branches per item crosses the bound of one check (CD970) and stops the run there.
The files are written by the tests (the wide schema is 3 MB).
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.engine import Engine, StopReason
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.engine.types import ContextView, ProposedFact, Provenance
from converge_dsl.packs import PackSolverSuggestor, SuggestorDef
from converge_dsl.solvers import SolverPlan

MIXED = [i if i % 2 else f"s{i}" for i in range(40_000)]


def _wide(n: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}


def _pipeline(tmp: Path, schema: Any, answer: Any, **extra: Any) -> Path:
    doc = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "bounds",
        "keys": [{"name": "tickets", "schema": schema}],
        "models": {"default": {"adapter": "scripted", "script": "bounds.script.yaml"}},
        "budget": {"max_wall_s": 60},
        "promotion": {"max_content_length": 10**8},
        "seeds": [{"id": "s", "content": "go"}],
        "suggestors": [
            {
                "name": "classify",
                "kind": "llm",
                "model": "default",
                "dependencies": ["seeds"],
                "target": "tickets",
                "prompt": {"user": "go"},
                "output": {"format": "json", "id": "t", "content": "x", "confidence": 0.9},
            }
        ],
        **extra,
    }
    script = {
        "apiVersion": "converge-dsl/v1",
        "kind": "ModelScript",
        "rules": [{"match": {"suggestor": "classify"}, "reply": json.dumps(answer)}],
    }
    (tmp / "bounds.script.yaml").write_text(json.dumps(script), encoding="utf-8")
    path = tmp / "bounds.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _cli(*argv: str) -> tuple[int, Any, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([*argv, "--format", "json"], out, err)
    assert "Traceback" not in out.getvalue() + err.getvalue()
    return code, json.loads(out.getvalue()), err.getvalue()


def test_a_key_schema_of_100000_properties_is_refused_by_validate_and_run(tmp_path: Path) -> None:
    path = _pipeline(tmp_path, _wide(100_000), [{"p0": 1}])
    code, report, _ = _cli("validate", str(path))
    assert code == 2
    found = [(d["code"], d["path"]) for d in report]
    assert (codes.SCHEMA_TOO_LARGE, "keys[0].schema.properties") in found
    code, result, _ = _cli("run", str(path))
    assert code == 2
    assert codes.SCHEMA_TOO_LARGE in {d["code"] for d in result["diagnostics"]}


def test_forty_thousand_mixed_unique_items_are_checked_and_promoted(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"vals": {"type": "array", "uniqueItems": True}}}
    path = _pipeline(tmp_path, schema, [{"vals": MIXED}])
    code, result, _ = _cli("run", str(path))
    assert code == 0
    assert result["stop_reason"] == "converged"
    assert [f["id"] for f in result["facts"]["tickets"]] == ["t"]


def test_an_answer_too_costly_to_check_stops_the_run_at_the_suggestor(tmp_path: Path) -> None:
    branches = [{"type": "object", "required": [f"k{i}"]} for i in range(100)]
    schema = {"properties": {"vals": {"items": {"anyOf": [*branches, {"type": "integer"}]}}}}
    path = _pipeline(tmp_path, schema, [{"vals": list(range(40_000))}])
    code, result, _ = _cli("run", str(path))
    assert code == 1
    assert result["stop_reason"] == "error"
    (note,) = result["diagnostics"]
    assert note["code"] == codes.SCHEMA_WORK_EXCEEDED
    assert "anyOf" in note["message"]
    assert "suggestor 'classify'" in note["message"]
    assert (note["line"], note["path"]) == (1, "suggestors[0]")  # located at the suggestor


class WideSolver:
    """A native solver whose input schema is the audit's 100,000 properties."""

    name = "test.wide"

    def complexity_hint(self) -> str:
        return "O(n)"

    def input_schema(self) -> Mapping[str, Any]:
        return _wide(100_000)

    def solve(self, problem: Mapping[str, Any]) -> SolverPlan:
        return SolverPlan({"done": True}, 0.9, "solved")

    def check(self, problem: Mapping[str, Any], plan: Mapping[str, Any]) -> tuple[()]:
        return ()


def test_a_wide_schema_reaching_run_time_through_a_pack_is_a_run_error() -> None:
    solver = WideSolver()
    pack = PackSolverSuggestor(
        name="solve",
        input_key="constraints",
        output_key="strategies",
        solver=solver,  # type: ignore[arg-type]
        definition=SuggestorDef(name="wide", kind="solver", solver=solver.name),
        invariants=(),
        params={},
        source="solve@demo",
    )

    def problem(ctx: ContextView) -> list[ProposedFact]:
        return [ProposedFact("constraints", "p", "a problem", 1.0, Provenance("seed"), {"p0": 1})]

    engine = Engine()
    engine.register(FnSuggestor("seed", [], problem))
    engine.register(pack)
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.ERROR
    (note,) = result.notes
    assert note.suggestor == "solve"
    assert "properties has 100000 entries" in note.message
