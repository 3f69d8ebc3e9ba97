"""The optimization pack manifest against the solvers it names."""

from __future__ import annotations

import json
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from converge_dsl.engine.types import freeze_json
from converge_dsl.sandbox._templating import undeclared_names
from converge_dsl.solvers import ENTRY_POINT_GROUP, Solver

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "builtin_packs" / "optimization"
REGISTERED = {
    ep.name: ep
    for ep in entry_points(group=ENTRY_POINT_GROUP)
    if ep.name.startswith("optimization.")
}


def test_manifest_is_valid_against_the_pack_schema(pack_manifest: dict[str, Any]) -> None:
    schema = json.loads((ROOT / "schemas" / "pack.v1.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(pack_manifest)
    first_line = (PACK / "pack.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first_line == "# yaml-language-server: $schema=../../schemas/pack.v1.json"


def test_every_registered_solver_has_one_suggestor(pack_manifest: dict[str, Any]) -> None:
    named = sorted(s["solver"] for s in pack_manifest["suggestors"].values())
    assert named == sorted(REGISTERED)
    assert len(named) == 6


@pytest.mark.parametrize("name", sorted(REGISTERED))
def test_suggestor_entry_matches_its_solver(name: str, pack_manifest: dict[str, Any]) -> None:
    solver = REGISTERED[name].load()()
    assert isinstance(solver, Solver)
    assert solver.name == name
    short = name.split(".", 1)[1]
    entry = pack_manifest["suggestors"][short]
    assert entry["kind"] == "solver"
    assert entry["complexity"] == solver.complexity_hint()
    assert entry["input_schema"] == f"schemas/{short}.input.json"
    on_disk = json.loads((PACK / entry["input_schema"]).read_text(encoding="utf-8"))
    assert on_disk == solver.input_schema()
    jsonschema.Draft202012Validator.check_schema(on_disk)
    # input_schema() hands out a copy: callers cannot corrupt the solver.
    solver.input_schema()["type"] = "array"  # type: ignore[index]
    assert solver.input_schema()["type"] == "object"


def test_invariants_read_only_plan_and_input(pack_manifest: dict[str, Any]) -> None:
    for invariant in pack_manifest["invariants"]:
        assert invariant["suggestor"] in pack_manifest["suggestors"]
        assert undeclared_names(invariant["check"], expression=True) <= {"plan", "input"}


def test_assignment_complexity_hint_is_the_documented_one() -> None:
    solver = REGISTERED["optimization.assignment"].load()()
    assert solver.complexity_hint() == "O(n^3), n = agents/tasks, practical for n <= 500"


def test_frozen_context_content_is_accepted() -> None:
    solver = REGISTERED["optimization.portfolio"].load()()
    problem = {"projects": [{"id": "a", "cost": 2, "value": 3}], "budget": 2}
    assert solver.solve(freeze_json(problem)).plan == solver.solve(problem).plan
    assert all(
        c.ok for c in solver.check(freeze_json(problem), freeze_json(solver.solve(problem).plan))
    )
