"""Fixtures shared by the solver tests: the pack's invariants, evaluated with the solver's own."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from converge_dsl.sandbox._templating import compile_expression
from converge_dsl.solvers import SelfCheckingSolver, Solver, SolverPlan

PACK_FOLDER = Path(__file__).resolve().parents[2] / "builtin_packs" / "optimization"

Verifier = Callable[[Solver, Mapping[str, Any], SolverPlan], None]


@pytest.fixture(scope="session")
def pack_manifest() -> dict[str, Any]:
    with (PACK_FOLDER / "pack.yaml").open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def verify(pack_manifest: dict[str, Any]) -> Verifier:
    """Assert that every `check()` invariant and every pack invariant holds on a plan."""
    by_suggestor: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
    for invariant in pack_manifest["invariants"]:
        compiled = compile_expression(invariant["check"])
        by_suggestor.setdefault(invariant["suggestor"], []).append((invariant["name"], compiled))

    def _verify(solver: Solver, problem: Mapping[str, Any], result: SolverPlan) -> None:
        failed = [c for c in solver.check(problem, result.plan) if not c.ok]
        assert not failed, failed
        suggestor = solver.name.split(".", 1)[1]
        for name, expression in by_suggestor[suggestor]:
            assert expression(plan=result.plan, input=problem) is True, name
        assert 0.0 < result.confidence <= 1.0
        assert result.summary.endswith(".")
        if isinstance(solver, SelfCheckingSolver):  # its checks read the plan it proposes
            plain = json.loads(json.dumps(problem))
            answer, checks = solver.solve_checked(plain)
            assert answer.plan == solver.solve(problem).plan
            assert checks == solver.check(problem, answer.plan)

    return _verify


@pytest.fixture(scope="session")
def failed_checks() -> Callable[[Solver, Mapping[str, Any], Mapping[str, Any]], set[str]]:
    """Names of the invariants `check()` reports as failed on a (hand-broken) plan."""

    def _failed(solver: Solver, problem: Mapping[str, Any], plan: Mapping[str, Any]) -> set[str]:
        return {c.name for c in solver.check(problem, plan) if not c.ok}

    return _failed
