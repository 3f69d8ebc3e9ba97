from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl.solvers import SolverError
from converge_dsl.solvers.work import WorkSchedulingSolver

SOLVER = WorkSchedulingSolver()
SKILLS = ["cad", "weld", "wire"]


@st.composite
def projects(draw: st.DrawFn, unlimited: bool = False) -> dict[str, Any]:
    count = draw(st.integers(0, 9))
    tasks = []
    for i in range(count):
        tasks.append(
            {
                "id": f"t{i}",
                "duration": draw(st.integers(0, 7)),
                # Dependencies only on earlier tasks: always acyclic.
                "depends_on": draw(
                    st.lists(st.sampled_from([f"t{j}" for j in range(i)]), unique=True)
                )
                if i
                else [],
                "skills": []
                if unlimited
                else draw(st.lists(st.sampled_from(SKILLS), unique=True, max_size=1)),
            }
        )
    workers = [{"id": "generalist", "skills": SKILLS}]
    if unlimited:
        workers += [{"id": f"w{i}", "skills": SKILLS} for i in range(count)]
    else:
        workers += [
            {"id": f"w{i}", "skills": [draw(st.sampled_from(SKILLS))]}
            for i in range(draw(st.integers(0, 2)))
        ]
    return {"tasks": tasks, "workers": workers}


@settings(max_examples=150, deadline=None)
@given(problem=projects())
def test_invariants_hold_on_every_plan(problem: dict[str, Any], verify: Any) -> None:
    result = SOLVER.solve(problem)
    verify(SOLVER, problem, result)
    assert result.plan["makespan"] >= result.plan["lower_bound"] - 1e-9
    assert result.confidence == (
        1.0 if result.plan["makespan"] <= result.plan["lower_bound"] else 0.75
    )


@settings(max_examples=60, deadline=None)
@given(problem=projects(unlimited=True))
def test_with_enough_workers_the_critical_path_is_met(problem: dict[str, Any]) -> None:
    result = SOLVER.solve(problem)
    assert result.plan["makespan"] == result.plan["critical_path_length"]
    assert result.confidence == 1.0


def plant() -> dict[str, Any]:
    return {
        "workers": [{"id": "ann", "skills": ["py"]}, {"id": "bob"}],
        "tasks": [
            {"id": "a", "duration": 3},
            {"id": "b", "duration": 2, "depends_on": ["a"]},
            {"id": "c", "duration": 4, "skills": ["py"]},
            {"id": "d", "duration": 1, "depends_on": ["b", "c"]},
        ],
    }


def test_schedule_follows_the_critical_path_and_spares_versatile_workers() -> None:
    result = SOLVER.solve(plant())
    assert [(s["task"], s["worker"], s["start"]) for s in result.plan["schedule"]] == [
        ("c", "ann", 0),
        ("a", "bob", 0),
        ("b", "bob", 3),
        ("d", "bob", 5),
    ]
    assert result.plan["critical_path"] == ["a", "b", "d"]
    assert result.summary == (
        "Scheduled 4 tasks on 2 workers, makespan 6 (lower bound 6, optimal); "
        "critical path a -> b -> d."
    )


def test_check_catches_hand_broken_plans(failed_checks: Any) -> None:
    problem = plant()
    plan = copy.deepcopy(dict(SOLVER.solve(problem).plan))
    plan["schedule"][2].update(start=2, end=4)  # b before a ends
    plan["schedule"][0]["worker"] = "bob"  # c needs py, overlaps a on bob
    plan["schedule"].pop()  # d missing
    assert failed_checks(SOLVER, problem, plan) == {
        "every-task-scheduled",
        "precedence-respected",
        "worker-has-skills",
        "worker-does-one-task-at-a-time",
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda p: p["tasks"][0].update(depends_on=["d"]),
            "$.tasks[1].depends_on: dependency cycle: a -> d -> b -> a (each depends on the next)",
        ),
        (
            lambda p: p["tasks"][1].update(depends_on=["z"]),
            "$.tasks[1].depends_on[0]: unknown task 'z'",
        ),
        (
            lambda p: p["tasks"][2].update(skills=["rust"]),
            "$.tasks[2].skills: no worker has all of the skills ['rust'] that task 'c' needs",
        ),
        (
            lambda p: p["tasks"][2].update(duration=-1),
            "$.tasks[2].duration: -1 is less than the minimum of 0",
        ),
    ],
)
def test_bad_projects_are_refused_with_their_path(change: Any, message: str) -> None:
    problem = plant()
    change(problem)
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.message == message
