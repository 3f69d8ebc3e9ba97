"""Solver timings: each built-in solver on one large generated instance.

Instances (seeded, so every run solves the same problems):
- assignment: 500 x 500 cost matrix
- min-cost flow: 2,000 nodes / 22,000 arcs / 1,000 units
- portfolio: 1,000 projects
- routing: 1,000 stops
- work scheduling: 20,000 tasks
- greedy scheduling: 50,000 jobs

Each time is `solve()` end to end (schema validation included), best of a
few runs. Then min-cost flow is compared with its reference algorithm
(successive shortest paths, kept as the verified fallback) on a mid-size
network (500 nodes / 5,500 arcs / 250 units), both measured in this run;
both plans must cost the same. Last line:

    flow new/old time ratio: X

X = new solve time / old solve time (lower is better).

Run: .venv/bin/python bench/solvers.py
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from converge_dsl.solvers import Solver, SolverPlan
from converge_dsl.solvers.assignment import AssignmentSolver
from converge_dsl.solvers.flow import MinCostFlowSolver
from converge_dsl.solvers.portfolio import PortfolioSolver
from converge_dsl.solvers.routing import TimeWindowRoutingSolver
from converge_dsl.solvers.scheduling import GreedySchedulingSolver
from converge_dsl.solvers.work import WorkSchedulingSolver

Problem = dict[str, Any]


def assignment(size: int, rng: random.Random) -> Problem:
    return {"cost_matrix": [[rng.randint(1, 1000) for _ in range(size)] for _ in range(size)]}


def flow(nodes: int, arcs: int, units: int, rng: random.Random) -> Problem:
    """20 sources and 20 sinks; a ring keeps it feasible, random arcs make it interesting."""
    names = [f"n{i:05d}" for i in range(nodes)]
    supply = [0] * nodes
    for i in range(20):
        supply[i] += units // 20
        supply[nodes - 1 - i] -= units // 20
    edges = [
        {"id": f"r{i:05d}", "from": names[i], "to": names[(i + 1) % nodes]}
        | {"capacity": units, "cost": 50}
        for i in range(nodes)
    ]
    while len(edges) < arcs:
        tail, head = rng.randrange(nodes), rng.randrange(nodes)
        if tail != head:
            edges.append(
                {"id": f"a{len(edges):05d}", "from": names[tail], "to": names[head]}
                | {"capacity": rng.randint(1, 30), "cost": rng.randint(1, 100)}
            )
    return {
        "nodes": [{"id": n, "supply": s} for n, s in zip(names, supply, strict=True)],
        "arcs": edges,
    }


def portfolio(projects: int, rng: random.Random) -> Problem:
    items = [
        {"id": f"p{i:04d}", "cost": rng.randint(1, 40), "value": rng.randint(1, 100)}
        for i in range(projects)
    ]
    return {"projects": items, "budget": 10 * projects}


def routing(stops: int, rng: random.Random) -> Problem:
    return {
        "depot": {"x": 500, "y": 500, "close": 100_000},
        "vehicles": [{"id": f"v{i:02d}", "capacity": 200} for i in range(stops // 20)],
        "stops": [
            {"id": f"s{i:04d}", "x": rng.uniform(0, 1000), "y": rng.uniform(0, 1000)}
            | {"demand": rng.randint(1, 10), "service": 5}
            for i in range(stops)
        ],
    }


def work(tasks: int, rng: random.Random) -> Problem:
    skills = ["build", "test", "deploy", "design"]
    return {
        "tasks": [
            {
                "id": f"t{i:05d}",
                "duration": rng.randint(1, 20),
                "depends_on": sorted({f"t{rng.randrange(i):05d}" for _ in range(2)}) if i else [],
                "skills": [rng.choice(skills)],
            }
            for i in range(tasks)
        ],
        "workers": [{"id": f"w{i:02d}", "skills": skills[: 1 + i % 4]} for i in range(40)],
    }


def greedy(jobs: int, rng: random.Random) -> Problem:
    return {
        "machines": [{"id": f"m{i:02d}"} for i in range(20)],
        "jobs": [
            {"id": f"j{i:05d}", "duration": rng.randint(1, 50), "release": rng.randint(0, 5000)}
            for i in range(jobs)
        ],
        "rule": "spt",
        "on_late": "allow",
    }


def best_time(solver: Solver, problem: Problem, repeats: int) -> tuple[float, SolverPlan]:
    best, plan = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        plan = solver.solve(problem)
        best = min(best, time.perf_counter() - started)
    assert plan is not None
    return best, plan


def main() -> None:
    cases: list[tuple[str, Solver, Callable[[random.Random], Problem]]] = [
        ("assignment 500x500", AssignmentSolver(), lambda r: assignment(500, r)),
        ("min_cost_flow 2,000 nodes/22k arcs/1,000 units", MinCostFlowSolver(),
         lambda r: flow(2000, 22_000, 1000, r)),
        ("portfolio 1,000 projects", PortfolioSolver(), lambda r: portfolio(1000, r)),
        ("routing 1,000 stops", TimeWindowRoutingSolver(), lambda r: routing(1000, r)),
        ("work_scheduling 20,000 tasks", WorkSchedulingSolver(), lambda r: work(20_000, r)),
        ("greedy_scheduling 50,000 jobs", GreedySchedulingSolver(), lambda r: greedy(50_000, r)),
    ]  # fmt: skip
    for label, solver, make in cases:
        seconds, result = best_time(solver, make(random.Random(7)), repeats=3)
        print(f"{label:<50} {seconds:8.3f} s  {result.summary[:90]}")

    problem = flow(500, 5500, 250, random.Random(11))
    new_seconds, new = best_time(MinCostFlowSolver(), problem, repeats=3)
    old_seconds, old = best_time(MinCostFlowSolver(method="ssp"), problem, repeats=1)
    assert new.plan["total_cost"] == old.plan["total_cost"], (new.summary, old.summary)
    print(f"min_cost_flow mid-size 500 nodes/5,500 arcs/250 units: LP {new_seconds:.3f} s,")
    print(f"  successive shortest paths {old_seconds:.3f} s, both cost {new.plan['total_cost']}")
    print(f"flow new/old time ratio: {new_seconds / old_seconds:.4f}")


if __name__ == "__main__":
    main()
