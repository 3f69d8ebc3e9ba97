from __future__ import annotations

import copy
import itertools
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl.solvers import SolverError
from converge_dsl.solvers.assignment import AssignmentSolver

SOLVER = AssignmentSolver()


@st.composite
def problems(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 4))
    m = draw(st.integers(1, 4))
    matrix = [[draw(st.integers(-5, 20)) for _ in range(m)] for _ in range(n)]
    cells = [(i, j) for i in range(n) for j in range(m)]
    forbidden = draw(st.lists(st.sampled_from(cells), unique=True, max_size=len(cells)))
    return {
        "cost_matrix": matrix,
        "forbidden": [{"agent": f"a{i}", "task": f"t{j}"} for i, j in forbidden],
        "objective": draw(st.sampled_from(["min", "max"])),
    }


def brute_force(problem: dict[str, Any]) -> tuple[int, int]:
    """(most pairs, best cost among those) over every partial matching."""
    matrix = problem["cost_matrix"]
    banned = {(f["agent"], f["task"]) for f in problem["forbidden"]}
    sign = -1 if problem["objective"] == "max" else 1
    best: tuple[int, int] = (0, 0)
    for choice in itertools.product(range(-1, len(matrix[0])), repeat=len(matrix)):
        used = [j for j in choice if j >= 0]
        if len(used) != len(set(used)):
            continue
        pairs = [(i, j) for i, j in enumerate(choice) if j >= 0]
        if any((f"a{i}", f"t{j}") in banned for i, j in pairs):
            continue
        key = (-len(pairs), sign * sum(matrix[i][j] for i, j in pairs))
        best = min(best, key)
    return -best[0], sign * best[1]


@settings(max_examples=150, deadline=None)
@given(problem=problems())
def test_assignment_matches_brute_force(problem: dict[str, Any], verify: Any) -> None:
    result = SOLVER.solve(problem)
    count, cost = brute_force(problem)
    assert len(result.plan["assignments"]) == count
    assert result.plan["total_cost"] == cost
    assert result.confidence == 1.0
    verify(SOLVER, problem, result)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda n: st.lists(
            st.lists(st.integers(0, 50), min_size=n, max_size=n), min_size=n, max_size=n
        )
    )
)
def test_square_assignment_is_the_best_permutation(matrix: list[list[int]]) -> None:
    best = min(
        sum(matrix[i][p[i]] for i in range(len(matrix)))
        for p in itertools.permutations(range(len(matrix)))
    )
    assert SOLVER.solve({"cost_matrix": matrix}).plan["total_cost"] == best


def sparse() -> dict[str, Any]:
    return {
        "agents": ["ann", {"id": "bob"}, "cy"],
        "tasks": ["paint", "wire"],
        "costs": [
            {"agent": "ann", "task": "paint", "cost": 4},
            {"agent": "bob", "task": "paint", "cost": 2},
            {"agent": "bob", "task": "wire", "cost": 3},
            {"agent": "cy", "task": "wire", "cost": 9},
        ],
    }


def test_sparse_problem_names_things_by_id_and_reports_the_idle() -> None:
    result = SOLVER.solve(sparse())
    assert result.plan["assignments"] == [
        {"agent": "ann", "task": "paint", "cost": 4},
        {"agent": "bob", "task": "wire", "cost": 3},
    ]
    assert result.plan["unassigned_agents"] == ["cy"]
    assert result.summary == "Assigned 2 of 2 tasks to 3 agents, total cost 7 (optimal)."


def test_plan_does_not_depend_on_input_order() -> None:
    problem = sparse()
    shuffled = copy.deepcopy(problem)
    for key in ("agents", "tasks", "costs"):
        random.Random(7).shuffle(shuffled[key])
    assert SOLVER.solve(shuffled).plan == SOLVER.solve(problem).plan
    # Ties (every cost equal) are broken by id, the same way every time.
    tie = {"cost_matrix": [[1, 1], [1, 1]], "agents": ["y", "x"], "tasks": ["q", "p"]}
    assert [a["task"] for a in SOLVER.solve(tie).plan["assignments"]] == ["p", "q"]


def test_check_catches_hand_broken_plans(failed_checks: Any) -> None:
    problem = sparse()
    plan = copy.deepcopy(dict(SOLVER.solve(problem).plan))
    plan["assignments"].append({"agent": "cy", "task": "wire", "cost": 9})
    plan["assignments"].append({"agent": "cy", "task": "paint", "cost": 1})
    assert failed_checks(SOLVER, problem, plan) == {
        "task-assigned-at-most-once",
        "agent-used-at-most-once",
        "pairs-allowed",
        "total-cost-consistent",
    }
    assert failed_checks(SOLVER, problem, {"assignments": "nonsense"}) == {"plan-well-formed"}


def test_required_tasks_that_cannot_be_assigned_are_named() -> None:
    problem = sparse() | {
        "forbidden": [{"agent": "bob", "task": "paint"}, {"agent": "ann", "task": "paint"}]
    }
    problem["require_all_tasks"] = True
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert str(info.value).startswith("$.tasks: 1 of 2 tasks cannot be assigned: paint")


@pytest.mark.parametrize(
    ("problem", "message"),
    [
        ({"cost_matrix": [[1, 2], [3]]}, "$.cost_matrix[1]: has 1 entries, row 0 has 2"),
        ({"cost_matrix": [[1, "x"]]}, "$.cost_matrix[0][1]: 'x' is not of type 'number'"),
        (
            {"cost_matrix": [[1]], "agents": ["a", "b"]},
            "$.agents: has 2 ids but cost_matrix has 1 rows",
        ),
        ({"cost_matrix": [[1, 2]], "tasks": ["t", "t"]}, "$.tasks[1].id: duplicate id 't'"),
        (
            sparse() | {"forbidden": [{"agent": "anne", "task": "wire"}]},
            "$.forbidden[0].agent: unknown agent 'anne'",
        ),
    ],
)
def test_malformed_input_is_refused_with_its_path(problem: dict[str, Any], message: str) -> None:
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.message == message


def test_unknown_id_suggests_the_closest() -> None:
    problem = sparse() | {"forbidden": [{"agent": "anne", "task": "wire"}]}
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.hint == "did you mean 'ann'?"


def test_mixed_forms_are_refused_with_the_forms_named() -> None:
    with pytest.raises(SolverError) as info:
        SOLVER.solve({"cost_matrix": [[1]], "costs": []})
    assert info.value.message == "$: matches none of the accepted forms"
    assert "Give either cost_matrix" in str(info.value.hint)
