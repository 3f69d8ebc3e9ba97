from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl.solvers import SolverError
from converge_dsl.solvers.scheduling import GreedySchedulingSolver

SOLVER = GreedySchedulingSolver()


@st.composite
def shops(draw: st.DrawFn, machines: int = 3) -> dict[str, Any]:
    names = [f"m{i}" for i in range(draw(st.integers(1, machines)))]
    jobs = []
    for i in range(draw(st.integers(0, 8))):
        job: dict[str, Any] = {"id": f"j{i}", "duration": draw(st.integers(0, 6))}
        if draw(st.booleans()):
            job["release"] = draw(st.integers(0, 5))
        if draw(st.booleans()):
            job["deadline"] = draw(st.integers(0, 20))
        if draw(st.booleans()):
            job["machines"] = draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
        job["weight"] = draw(st.integers(1, 4))
        jobs.append(job)
    return {
        "machines": [{"id": name} for name in names],
        "jobs": jobs,
        "rule": draw(st.sampled_from(["edd", "spt", "wspt"])),
        "on_late": draw(st.sampled_from(["reject", "allow"])),
    }


@settings(max_examples=150, deadline=None)
@given(problem=shops())
def test_invariants_hold_on_every_plan(problem: dict[str, Any], verify: Any) -> None:
    verify(SOLVER, problem, SOLVER.solve(problem))


@settings(max_examples=40, deadline=None)
@given(problem=shops(machines=1))
def test_smiths_rule_is_optimal_on_one_machine(problem: dict[str, Any]) -> None:
    jobs = [
        {k: v for k, v in j.items() if k in ("id", "duration", "weight")}
        for j in problem["jobs"][:6]
    ]
    problem = {"machines": problem["machines"], "jobs": jobs, "rule": "wspt", "on_late": "allow"}
    result = SOLVER.solve(problem)
    best = min(
        sum(j["weight"] * sum(k["duration"] for k in order[: i + 1]) for i, j in enumerate(order))
        for order in itertools.permutations(jobs)
    )
    assert result.plan["total_weighted_completion"] == best
    assert result.confidence == 1.0


def shop() -> dict[str, Any]:
    return {
        "machines": [{"id": "m1"}, {"id": "m2"}],
        "jobs": [
            {"id": "a", "duration": 3, "deadline": 3},
            {"id": "b", "duration": 2, "deadline": 2},
            {"id": "c", "duration": 4, "deadline": 5},
            {"id": "d", "duration": 1, "machines": ["m2"], "release": 1},
        ],
    }


def test_late_jobs_are_rejected_and_reported() -> None:
    result = SOLVER.solve(shop())
    assert [(s["job"], s["machine"], s["start"]) for s in result.plan["schedule"]] == [
        ("b", "m1", 0),
        ("a", "m2", 0),
        ("d", "m2", 3),
    ]
    assert result.plan["unscheduled"] == [
        {"job": "c", "reason": "would finish at 6, after its deadline 5"}
    ]
    assert result.confidence == 0.7
    assert (
        result.summary
        == "Scheduled 3 of 4 jobs on 2 machines by EDD, makespan 4; rejected (deadline): c."
    )


def test_late_jobs_can_be_allowed() -> None:
    result = SOLVER.solve(shop() | {"on_late": "allow"})
    assert result.plan["late_jobs"] == ["c"]
    assert result.plan["unscheduled"] == []


def test_check_catches_hand_broken_plans(failed_checks: Any) -> None:
    problem = shop()
    plan = copy.deepcopy(dict(SOLVER.solve(problem).plan))
    plan["schedule"][2].update(
        machine="m1", start=1, end=3
    )  # d: ineligible, overlaps b, wrong length
    plan["schedule"].append(
        {"job": "c", "machine": "m2", "start": 4, "end": 8}
    )  # late and listed twice
    assert failed_checks(SOLVER, problem, plan) == {
        "machine-eligible",
        "machine-runs-one-job-at-a-time",
        "release-and-duration-respected",
        "deadlines-respected",
    }


def test_unknown_machine_is_refused_with_its_path() -> None:
    problem = shop()
    problem["jobs"][3]["machines"] = ["m10"]
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.message == "$.jobs[3].machines[0]: unknown machine 'm10'"
    assert info.value.hint == "did you mean 'm1'?"


@settings(max_examples=60, deadline=None)
@given(problem=shops())
def test_solve_checked_reads_the_problem_once_and_checks_as_check_valid(
    problem: dict[str, Any],
) -> None:
    from converge_dsl.solvers import scheduling

    expected = SOLVER.solve_valid(problem)
    verdicts = SOLVER.check_valid(problem, expected.plan)
    parses: list[object] = []
    real = scheduling._parse
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(scheduling, "_parse", lambda p: parses.append(p) or real(p))
        answer, checks = SOLVER.solve_checked(problem)
    assert (answer, checks) == (expected, verdicts)
    assert len(parses) == 1
