from __future__ import annotations

import copy
import itertools
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from converge_dsl.solvers import SolverError, flow
from converge_dsl.solvers.flow import MinCostFlowSolver

SOLVER = MinCostFlowSolver()


@st.composite
def networks(
    draw: st.DrawFn, max_nodes: int = 4, max_arcs: int = 5, max_capacity: int = 3
) -> dict[str, Any]:
    n = draw(st.integers(2, max_nodes))
    names = [f"n{i}" for i in range(n)]
    pairs = [(u, v) for u in names for v in names if u != v]
    arcs = draw(st.lists(st.sampled_from(pairs), max_size=max_arcs))
    supplies = [draw(st.integers(0, 3)) for _ in range(n)]
    sink = draw(st.integers(0, n - 1))
    supplies[sink] -= sum(supplies)
    return {
        "nodes": [{"id": name, "supply": s} for name, s in zip(names, supplies, strict=True)],
        "arcs": [
            {
                "id": f"e{k}",
                "from": u,
                "to": v,
                "capacity": draw(st.integers(0, max_capacity)),
                "cost": draw(st.integers(0, 5)),
            }
            for k, (u, v) in enumerate(arcs)
        ],
    }


def brute_force(problem: dict[str, Any]) -> float | None:
    """Least cost over every integer flow vector, or None when none balances."""
    arcs = problem["arcs"]
    supply = {node["id"]: node["supply"] for node in problem["nodes"]}
    best = None
    for flows in itertools.product(*(range(a["capacity"] + 1) for a in arcs)):
        net = dict.fromkeys(supply, 0)
        for arc, units in zip(arcs, flows, strict=True):
            net[arc["from"]] += units
            net[arc["to"]] -= units
        if net == supply:
            cost = sum(a["cost"] * f for a, f in zip(arcs, flows, strict=True))
            best = cost if best is None else min(best, cost)
    return best


def linear_programme(problem: dict[str, Any]) -> float | None:
    nodes = [node["id"] for node in problem["nodes"]]
    arcs = problem["arcs"]
    incidence = np.zeros((len(nodes), len(arcs)))
    for k, arc in enumerate(arcs):
        incidence[nodes.index(arc["from"]), k] += 1
        incidence[nodes.index(arc["to"]), k] -= 1
    result = linprog(
        [a["cost"] for a in arcs] or [0],
        A_eq=incidence if arcs else np.zeros((len(nodes), 1)),
        b_eq=[node["supply"] for node in problem["nodes"]],
        bounds=[(0, a["capacity"]) for a in arcs] or [(0, 0)],
        method="highs",
    )
    return float(result.fun) if result.status == 0 else None


def solved_cost(problem: dict[str, Any], verify: Any) -> float | None:
    try:
        result = SOLVER.solve(problem)
    except SolverError as error:
        failure = error.message
    else:
        verify(SOLVER, problem, result)
        assert result.confidence == 1.0
        return float(result.plan["total_cost"])
    assert "could not be routed" in failure
    return None


@settings(max_examples=120, deadline=None)
@given(problem=networks())
def test_flow_cost_matches_brute_force(problem: dict[str, Any], verify: Any) -> None:
    assert solved_cost(problem, verify) == brute_force(problem)


@settings(max_examples=60, deadline=None)
@given(problem=networks(max_nodes=7, max_arcs=16, max_capacity=9))
def test_flow_cost_matches_linear_programme(problem: dict[str, Any], verify: Any) -> None:
    expected = linear_programme(problem)
    got = solved_cost(problem, verify)
    assert (got is None) == (expected is None)
    if got is not None:
        assert got == pytest.approx(expected)


def diamond() -> dict[str, Any]:
    return {
        "nodes": [{"id": "s", "supply": 4}, {"id": "a"}, {"id": "b"}, {"id": "t", "supply": -4}],
        "arcs": [
            {"from": "s", "to": "a", "capacity": 3, "cost": 1},
            {"from": "s", "to": "b", "capacity": 2, "cost": 2},
            {"from": "a", "to": "t", "capacity": 2, "cost": 1},
            {"from": "b", "to": "t", "capacity": 3, "cost": 1},
            {"from": "a", "to": "b", "capacity": 5, "cost": 0},
        ],
    }


def test_plan_names_arcs_and_summary_is_plain() -> None:
    result = SOLVER.solve(diamond())
    assert [(f["arc"], f["flow"]) for f in result.plan["flows"]] == [
        ("a->b", 1),
        ("a->t", 2),
        ("b->t", 2),
        ("s->a", 3),
        ("s->b", 1),
    ]
    assert result.summary == "Routed 4 units over 5 arcs at minimum total cost 9."


def test_check_catches_hand_broken_plans(failed_checks: Any) -> None:
    problem = diamond()
    plan = copy.deepcopy(dict(SOLVER.solve(problem).plan))
    plan["flows"][3]["flow"] = 4  # s->a beyond capacity 3, and no longer balanced
    assert failed_checks(SOLVER, problem, plan) == {
        "capacity-respected",
        "flow-conserved",
        "total-cost-consistent",
    }
    # A feasible but dearer flow: s->b->t carries 2, s->a->t 2 (cost 10 > 9).
    dearer = {
        "flows": [
            {"arc": "s->a", "flow": 2},
            {"arc": "a->t", "flow": 2},
            {"arc": "s->b", "flow": 2},
            {"arc": "b->t", "flow": 2},
        ],
        "total_cost": 10,
    }
    assert failed_checks(SOLVER, problem, dearer) == {"cost-minimal"}
    checks = {c.name: c for c in SOLVER.check(problem, dearer)}
    assert checks["cost-minimal"].critical is False


def test_infeasible_flow_says_how_much_could_not_be_routed() -> None:
    problem = diamond()
    problem["arcs"][0]["capacity"] = 0
    problem["arcs"][1]["capacity"] = 1
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.message == (
        "$.arcs: infeasible: 3 of 4 units could not be routed; "
        "stuck at s (unshipped supply 3), t (unmet demand 3)"
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda p: p["nodes"][0].update(supply=5),
            "$.nodes: supplies total 5 but demands total 4; they must balance",
        ),
        (lambda p: p["arcs"][0].update({"to": "x"}), "$.arcs[0].to: unknown node 'x'"),
        (lambda p: p["arcs"].append(dict(p["arcs"][0])), "$.arcs[5].id: duplicate arc id 's->a'"),
        (
            lambda p: p["arcs"][2].update(cost=-1),
            "$.arcs[2].cost: -1 is less than the minimum of 0",
        ),
    ],
)
def test_malformed_network_is_refused_with_its_path(change: Any, message: str) -> None:
    problem = diamond()
    change(problem)
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    assert info.value.message == message


def test_same_network_same_plan() -> None:
    problem = diamond()
    reordered = copy.deepcopy(problem)
    reordered["arcs"].reverse()
    reordered["nodes"].reverse()
    assert SOLVER.solve(reordered).plan == SOLVER.solve(problem).plan


REFERENCE = MinCostFlowSolver(method="ssp")


def grid(width: int, units: int, cost: Any = 1) -> dict[str, Any]:
    """A width x width grid, sources on the left, sinks on the right, all arcs
    of equal cost: many optimal flows, so only canonical ordering makes the
    plan unique."""
    names = [[f"g{r:02d}-{c:02d}" for c in range(width)] for r in range(width)]
    nodes = [
        {"id": names[r][c], "supply": units if c == 0 else -units if c == width - 1 else 0}
        for r in range(width)
        for c in range(width)
    ]
    arcs = [
        {"from": names[r][c], "to": names[r2][c2], "capacity": units, "cost": cost}
        for r in range(width)
        for c in range(width)
        for r2, c2 in ((r + 1, c), (r - 1, c), (r, c + 1))
        if 0 <= r2 < width and 0 <= c2 < width
    ]
    return {"nodes": nodes, "arcs": arcs}


def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> Any:
        raise AssertionError("the verified LP answer was expected, not the fallback")

    monkeypatch.setattr(flow, "successive_shortest_paths", refuse)


def test_reordered_degenerate_network_gives_the_identical_plan() -> None:
    problem = grid(6, 3)
    expected = SOLVER.solve(problem).plan
    for seed in range(3):
        shuffled = copy.deepcopy(problem)
        random.Random(seed).shuffle(shuffled["arcs"])
        random.Random(seed + 10).shuffle(shuffled["nodes"])
        assert SOLVER.solve(shuffled).plan == expected


def test_lp_answer_is_verified_and_matches_the_reference(
    monkeypatch: pytest.MonkeyPatch, verify: Any
) -> None:
    problem = grid(8, 4, cost=0.25)
    problem["arcs"][5]["cost"] = 0.1
    reference = REFERENCE.solve(problem)
    no_fallback(monkeypatch)
    result = SOLVER.solve(problem)
    verify(SOLVER, problem, result)
    assert result.plan["total_cost"] == pytest.approx(reference.plan["total_cost"])
    assert result.plan["total_flow"] == 32


def test_infeasible_network_is_diagnosed_by_the_lp(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = grid(5, 3)
    for arc in problem["arcs"]:
        if arc["to"] == "g02-04":
            arc["capacity"] = 1
    with pytest.raises(SolverError) as reference:
        REFERENCE.solve(problem)
    no_fallback(monkeypatch)
    with pytest.raises(SolverError) as info:
        SOLVER.solve(problem)
    # Which source keeps the spare supply is a tie; the count and the sink are not.
    for message in (info.value.message, reference.value.message):
        assert message.startswith("$.arcs: infeasible: 2 of 15 units could not be routed; ")
        assert "g02-04 (unmet demand 2)" in message
        assert "(unshipped supply 2)" in message


def test_an_lp_answer_that_fails_verification_falls_back(
    monkeypatch: pytest.MonkeyPatch, verify: Any
) -> None:
    problem = grid(4, 2)
    honest = flow.linprog

    def dishonest(c: Any, **kwargs: Any) -> Any:
        result = honest(c, **kwargs)
        result.x = np.zeros_like(result.x)  # breaks conservation
        return result

    monkeypatch.setattr(flow, "linprog", dishonest)
    result = SOLVER.solve(problem)
    verify(SOLVER, problem, result)
    assert result.plan == REFERENCE.solve(problem).plan


def test_a_suboptimal_lp_vertex_is_not_certified(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = diamond()
    honest = flow.linprog

    def dearer(c: Any, **kwargs: Any) -> Any:
        result = honest(c, **kwargs)
        if len(c) == 5:  # the min-cost LP (arcs by id: a->b, a->t, b->t, s->a, s->b)
            # s->a 2, a->t 2, s->b 2, b->t 2: feasible, integral, cost 10 > 9.
            result.x = np.array([0, 2, 2, 2, 2], dtype=float)
        return result

    monkeypatch.setattr(flow, "linprog", dearer)
    assert SOLVER.solve(problem).plan["total_cost"] == 9


def test_complexity_hint_names_the_method() -> None:
    assert "HiGHS" in SOLVER.complexity_hint()
