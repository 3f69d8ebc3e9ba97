from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge_dsl.solvers import SolverError
from converge_dsl.solvers.routing import TimeWindowRoutingSolver

SOLVER = TimeWindowRoutingSolver()


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    stops = []
    for i in range(draw(st.integers(0, 10))):
        earliest = draw(st.integers(0, 30))
        stop: dict[str, Any] = {
            "id": f"s{i}",
            "x": draw(st.integers(-10, 10)),
            "y": draw(st.integers(-10, 10)),
            "demand": draw(st.integers(0, 6)),
            "service": draw(st.integers(0, 3)),
            "earliest": earliest,
        }
        if draw(st.booleans()):
            stop["latest"] = earliest + draw(st.integers(0, 30))
        stops.append(stop)
    depot: dict[str, Any] = {"x": 0, "y": 0}
    if draw(st.booleans()):
        depot["close"] = draw(st.integers(20, 120))
    return {
        "depot": depot,
        "vehicles": [
            {"id": f"v{i}", "capacity": draw(st.integers(0, 12))}
            for i in range(draw(st.integers(1, 3)))
        ],
        "stops": stops,
        "speed": draw(st.sampled_from([0.5, 1, 2])),
    }


@settings(max_examples=150, deadline=None)
@given(problem=fleets())
def test_invariants_hold_on_every_plan(problem: dict[str, Any], verify: Any) -> None:
    result = SOLVER.solve(problem)
    verify(SOLVER, problem, result)
    assert result.confidence == 0.6
    assert all(u["reason"] for u in result.plan["unserved"])


def town() -> dict[str, Any]:
    return {
        "depot": {"x": 0, "y": 0, "close": 100},
        "vehicles": [{"id": "v1", "capacity": 10}, {"id": "v2", "capacity": 5}],
        "stops": [
            {"id": "a", "x": 3, "y": 4, "demand": 4, "earliest": 10, "latest": 20},
            {"id": "b", "x": 6, "y": 8, "demand": 5, "service": 2},
            {"id": "c", "x": -3, "y": 0, "demand": 3, "latest": 2},
            {"id": "d", "x": 1, "y": 1, "demand": 30},
            {"id": "e", "x": 1, "y": 0, "demand": 2},
        ],
    }


def test_routes_wait_for_windows_and_unservable_stops_are_explained() -> None:
    result = SOLVER.solve(town())
    routes = {
        r["vehicle"]: [(v["stop"], v["start"]) for v in r["stops"]] for r in result.plan["routes"]
    }
    assert routes == {"v1": [("e", 1.0), ("a", 10)], "v2": [("b", 10.0)]}
    assert result.plan["unserved"] == [
        {
            "stop": "c",
            "reason": "time window [0, 2] cannot be met even on a direct trip from the depot",
        },
        {"stop": "d", "reason": "demand 30 exceeds every vehicle's capacity (largest 10)"},
    ]
    assert result.summary.startswith(
        "2 vehicles serve 3 of 5 stops, total distance 30.47; unserved: c ("
    )


def test_check_catches_hand_broken_plans(failed_checks: Any) -> None:
    problem = town()
    plan = copy.deepcopy(dict(SOLVER.solve(problem).plan))
    plan["routes"][0]["stops"][1]["start"] = 25  # a: after its window closes
    plan["routes"][1]["stops"].append(
        {
            "stop": "e",
            "arrival": 0,
            "start": 0,
            "departure": 0,
            "load": 7,
        }  # e twice, v2 over capacity,
    )  # and it cannot be at e at time 0 after serving b
    assert failed_checks(SOLVER, problem, plan) == {
        "stop-visited-at-most-once",
        "capacity-respected",
        "time-windows-respected",
        "travel-times-consistent",
    }


def test_duplicate_vehicle_is_refused_with_its_path() -> None:
    problem = town()
    problem["vehicles"][1]["id"] = "v1"
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.message == "$.vehicles[1].id: duplicate id 'v1'"
