"""Portfolio selection under a budget (`optimization.portfolio`).

Choose a subset of projects (each with a `cost` and a `value`) maximising
total value with total cost at most `budget`: the 0/1 knapsack problem.

- Exact method (`method: exact_dp`, confidence 1.0): when every cost is an
  integer and (projects x budget) <= `max_dp_cells` (default 20,000,000),
  a dynamic programme over budgets 0..floor(budget) finds a proven optimum.
- Fallback (`method: greedy_ratio`, confidence 0.8): otherwise, projects are
  taken by value/cost ratio (highest first, ties by id) while they fit, and
  the result is replaced by the single most valuable affordable project if
  that is worth more. This is guaranteed to reach at least half the optimum.

Projects are ordered by id before solving, so ties are broken by id. Projects
with non-positive value are never selected.
"""

from __future__ import annotations

import math

import numpy as np

from converge_dsl.solvers._common import (
    EPSILON,
    ID,
    NON_NEGATIVE,
    BaseSolver,
    Findings,
    JsonObject,
    at_most_once,
    index_by_id,
    number_text,
    plural,
    schema_document,
)
from converge_dsl.solvers._protocol import PlanCheck, SolverPlan

DEFAULT_MAX_DP_CELLS = 20_000_000

SCHEMA = schema_document(
    "portfolio",
    "Projects with a cost and a value, and a budget; select the most valuable affordable subset.",
    {
        "required": ["projects", "budget"],
        "additionalProperties": False,
        "properties": {
            "projects": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["id", "cost", "value"],
                    "properties": {"id": ID, "cost": NON_NEGATIVE, "value": {"type": "number"}},
                },
            },
            "budget": NON_NEGATIVE,
            "max_dp_cells": {
                "description": "Largest projects x budget table solved exactly.",
                "type": "integer",
                "minimum": 1,
                "default": DEFAULT_MAX_DP_CELLS,
            },
        },
    },
)

Project = tuple[str, float, float]  # id, cost, value


def _knapsack(projects: list[Project], budget: int) -> list[str]:
    """Exact 0/1 knapsack over integer costs; returns the chosen ids."""
    best = np.zeros(budget + 1)
    taken = np.zeros((len(projects), budget + 1), dtype=bool)
    for row, (_, cost, value) in enumerate(projects):
        c = int(cost)
        if value <= 0 or c > budget:
            continue
        candidate = best[: budget + 1 - c] + value
        improves = candidate > best[c:]
        taken[row, c:] = improves
        best[c:] = np.where(improves, candidate, best[c:])
    chosen, room = [], budget
    for row in range(len(projects) - 1, -1, -1):
        if taken[row, room]:
            chosen.append(projects[row][0])
            room -= int(projects[row][1])
    return sorted(chosen)


def _greedy(projects: list[Project], budget: float) -> list[str]:
    """Ratio greedy plus best single project: at least half the optimum."""
    useful = [p for p in projects if p[2] > 0 and p[1] <= budget]
    ranked = sorted(useful, key=lambda p: (-(p[2] / p[1]) if p[1] > 0 else -math.inf, p[0]))
    chosen, spent = [], 0.0
    for ident, cost, _ in ranked:
        if spent + cost <= budget + EPSILON:
            chosen.append(ident)
            spent += cost
    values = {p[0]: p[2] for p in useful}
    # `useful` is in id order and max() keeps the first of equals: ties go to the lower id.
    single = max(useful, key=lambda p: p[2], default=None)
    if single is not None and single[2] > sum(values[i] for i in chosen):
        return [single[0]]
    return sorted(chosen)


class PortfolioSolver(BaseSolver):
    """Budgeted project selection; see the module docstring."""

    NAME = "optimization.portfolio"
    COMPLEXITY = (
        "O(n * B), n = projects, B = budget (exact, integer costs); "
        "O(n log n) greedy fallback beyond max_dp_cells"
    )
    SCHEMA = SCHEMA

    def _solve(self, problem: JsonObject) -> SolverPlan:
        by_id = index_by_id(problem["projects"], ("projects",))
        projects = [(ident, p["cost"], p["value"]) for ident, p in sorted(by_id.items())]
        budget = problem["budget"]
        whole_budget = math.floor(budget)
        cells = len(projects) * (whole_budget + 1)
        exact = all(float(p[1]).is_integer() for p in projects) and cells <= problem.get(
            "max_dp_cells", DEFAULT_MAX_DP_CELLS
        )
        chosen = _knapsack(projects, whole_budget) if exact else _greedy(projects, budget)
        picked = set(chosen)
        plan: JsonObject = {
            "method": "exact_dp" if exact else "greedy_ratio",
            "selected": chosen,
            "rejected": [p[0] for p in projects if p[0] not in picked],
            "total_cost": sum(by_id[i]["cost"] for i in chosen),
            "total_value": sum(by_id[i]["value"] for i in chosen),
            "budget": budget,
        }
        quality = "optimal" if exact else "greedy, at least half the optimum"
        summary = (
            f"Selected {len(chosen)} of {plural(len(projects), 'project')}: value "
            f"{number_text(plan['total_value'])} for cost {number_text(plan['total_cost'])} "
            f"of budget {number_text(budget)} ({quality})."
        )
        return SolverPlan(plan, 1.0 if exact else 0.8, summary)

    def _check(self, problem: JsonObject, plan: JsonObject) -> tuple[PlanCheck, ...]:
        by_id = index_by_id(problem["projects"], ("projects",))
        known = [i for i in plan["selected"] if i in by_id]
        cost = sum(by_id[i]["cost"] for i in known)
        value = sum(by_id[i]["value"] for i in known)
        budget = Findings("budget-not-exceeded")
        budget.require(
            cost <= problem["budget"] + EPSILON,
            f"selected projects cost {number_text(cost)}, "
            f"budget is {number_text(problem['budget'])}",
        )
        totals = Findings("totals-consistent")
        totals.require(
            abs(cost - plan["total_cost"]) <= EPSILON, f"total_cost {plan['total_cost']} != {cost}"
        )
        totals.require(
            abs(value - plan["total_value"]) <= EPSILON,
            f"total_value {plan['total_value']} != {value}",
        )
        return (
            at_most_once("project-selected-at-most-once", plan["selected"], by_id, "project"),
            budget.result(),
            totals.result(),
        )
