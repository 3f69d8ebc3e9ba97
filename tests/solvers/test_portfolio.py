from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl.solvers import SolverError
from converge_dsl.solvers.portfolio import PortfolioSolver

SOLVER = PortfolioSolver()


@st.composite
def portfolios(draw: st.DrawFn, integer: bool = True, least: int = 0) -> dict[str, Any]:
    count = draw(st.integers(least, 9))
    cost = (
        st.integers(0, 12)
        if integer
        else st.floats(0, 12, allow_nan=False).map(lambda c: round(c, 2))
    )
    return {
        "projects": [
            {"id": f"p{i}", "cost": draw(cost), "value": draw(st.integers(-3, 25))}
            for i in range(count)
        ],
        "budget": draw(st.integers(least, 40)),
    }


def best_value(problem: dict[str, Any]) -> float:
    projects, budget = problem["projects"], problem["budget"]
    return max(
        sum(p["value"] for p in subset)
        for size in range(len(projects) + 1)
        for subset in itertools.combinations(projects, size)
        if sum(p["cost"] for p in subset) <= budget
    )


@settings(max_examples=150, deadline=None)
@given(problem=portfolios())
def test_exact_selection_matches_brute_force(problem: dict[str, Any], verify: Any) -> None:
    result = SOLVER.solve(problem)
    assert result.plan["method"] == "exact_dp"
    assert result.confidence == 1.0
    assert result.plan["total_value"] == best_value(problem)
    verify(SOLVER, problem, result)


@settings(max_examples=80, deadline=None)
@given(problem=portfolios(integer=False, least=1))
def test_fallback_is_within_half_of_the_optimum(problem: dict[str, Any], verify: Any) -> None:
    problem["max_dp_cells"] = 1
    result = SOLVER.solve(problem)
    assert result.plan["method"] == "greedy_ratio"
    assert result.confidence == 0.8
    assert result.plan["total_value"] >= best_value(problem) / 2
    verify(SOLVER, problem, result)


def example() -> dict[str, Any]:
    return {
        "projects": [
            {"id": "crm", "cost": 5, "value": 10},
            {"id": "erp", "cost": 4, "value": 7},
            {"id": "bi", "cost": 3, "value": 6},
            {"id": "wiki", "cost": 2, "value": 1},
        ],
        "budget": 7,
    }


def test_plan_and_summary() -> None:
    result = SOLVER.solve(example())
    assert result.plan["selected"] == ["bi", "erp"]
    assert result.plan["rejected"] == ["crm", "wiki"]
    assert result.summary == "Selected 2 of 4 projects: value 13 for cost 7 of budget 7 (optimal)."


def test_check_catches_hand_broken_plans(failed_checks: Any) -> None:
    problem = example()
    plan = copy.deepcopy(dict(SOLVER.solve(problem).plan))
    plan["selected"] += ["crm", "crm"]
    assert failed_checks(SOLVER, problem, plan) == {
        "project-selected-at-most-once",
        "budget-not-exceeded",
        "totals-consistent",
    }


def test_duplicate_project_is_refused_with_its_path() -> None:
    problem = example()
    problem["projects"][3]["id"] = "crm"
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.message == "$.projects[3].id: duplicate id 'crm'"


def test_missing_budget_is_refused() -> None:
    with pytest.raises(SolverError) as info:
        SOLVER.solve({"projects": []})
    assert info.value.message == "$: 'budget' is a required property"
