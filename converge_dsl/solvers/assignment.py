"""Optimal assignment of agents to tasks (`optimization.assignment`).

The problem is either a dense `cost_matrix` (rows = agents, columns = tasks,
ids optional) or `agents`/`tasks` with a sparse `costs` list (pairs not listed
are not allowed). `forbidden` pairs are excluded in both forms. Rectangular
problems are allowed.

The objective is lexicographic: first the largest possible number of
agent-task pairs, then the least total cost (greatest with
`objective: max`). It is solved exactly with the Hungarian-type algorithm of
`scipy.optimize.linear_sum_assignment`; disallowed pairs get a penalty larger
than any possible difference in allowed cost, so a matching that uses fewer of
them always wins, and penalised pairs are dropped from the plan. Confidence is
1.0 (a proven optimum). Agents and tasks are ordered by id before solving, so
ties are broken by id and the plan does not depend on input order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from converge_dsl.solvers._common import (
    EPSILON,
    ID,
    BaseSolver,
    Findings,
    JsonObject,
    at_most_once,
    fail,
    index_by_id,
    lookup,
    number_text,
    plural,
    schema_document,
)
from converge_dsl.solvers._protocol import PlanCheck, SolverPlan

_PAIR = {
    "type": "object",
    "required": ["agent", "task"],
    "additionalProperties": False,
    "properties": {"agent": ID, "task": ID},
}
_MEMBER = {
    "type": "object",
    "required": ["id"],
    "properties": {"id": ID},
}

SCHEMA = schema_document(
    "assignment",
    "Agents, tasks and the cost of each agent-task pair. Give either cost_matrix "
    "(with optional agent and task ids) or agents, tasks and costs.",
    {
        "properties": {
            "cost_matrix": {
                "description": "Row i, column j: cost of agent i doing task j (rectangular ok).",
                "type": "array",
                "minItems": 1,
                "items": {"type": "array", "minItems": 1, "items": {"type": "number"}},
            },
            "agents": {
                "description": "Agent ids (strings, with cost_matrix) or objects with an id.",
                "type": "array",
                "items": {"anyOf": [ID, _MEMBER]},
            },
            "tasks": {
                "description": "Task ids (strings, with cost_matrix) or objects with an id.",
                "type": "array",
                "items": {"anyOf": [ID, _MEMBER]},
            },
            "costs": {
                "description": "Allowed pairs and their costs; a pair not listed is not allowed.",
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["agent", "task", "cost"],
                    "additionalProperties": False,
                    "properties": {"agent": ID, "task": ID, "cost": {"type": "number"}},
                },
            },
            "forbidden": {
                "description": "Pairs that must not be used.",
                "type": "array",
                "items": _PAIR,
            },
            "objective": {"enum": ["min", "max"], "default": "min"},
            "require_all_tasks": {
                "description": "Fail (SolverError) unless every task can be assigned.",
                "type": "boolean",
                "default": False,
            },
        },
        "additionalProperties": False,
        "oneOf": [
            {"required": ["cost_matrix"], "not": {"required": ["costs"]}},
            {"required": ["agents", "tasks", "costs"], "not": {"required": ["cost_matrix"]}},
        ],
    },
)


def _ids(raw: list[Any], key: str) -> list[str]:
    idents = [item if isinstance(item, str) else item["id"] for item in raw]
    index_by_id([{"id": ident} for ident in idents], (key,))
    return idents


def _pair_costs(problem: JsonObject) -> tuple[list[str], list[str], dict[tuple[str, str], float]]:
    """Agent ids, task ids and the cost of every allowed pair."""
    allowed: dict[tuple[str, str], float] = {}
    if "cost_matrix" in problem:
        matrix = problem["cost_matrix"]
        width = len(matrix[0])
        for row, values in enumerate(matrix):
            if len(values) != width:
                raise fail(("cost_matrix", row), f"has {len(values)} entries, row 0 has {width}")
        agents = _ids(problem.get("agents", [f"a{i}" for i in range(len(matrix))]), "agents")
        tasks = _ids(problem.get("tasks", [f"t{j}" for j in range(width)]), "tasks")
        if len(agents) != len(matrix):
            raise fail(("agents",), f"has {len(agents)} ids but cost_matrix has {len(matrix)} rows")
        if len(tasks) != width:
            raise fail(("tasks",), f"has {len(tasks)} ids but cost_matrix has {width} columns")
        for i, agent in enumerate(agents):
            for j, task in enumerate(tasks):
                allowed[agent, task] = matrix[i][j]
    else:
        agents = _ids(problem["agents"], "agents")
        tasks = _ids(problem["tasks"], "tasks")
        for position, entry in enumerate(problem["costs"]):
            pair = (
                lookup(entry["agent"], agents, ("costs", position, "agent"), "agent"),
                lookup(entry["task"], tasks, ("costs", position, "task"), "task"),
            )
            if pair in allowed:
                raise fail(("costs", position), f"pair {pair[0]!r}/{pair[1]!r} is listed twice")
            allowed[pair] = entry["cost"]
    for position, entry in enumerate(problem.get("forbidden", [])):
        lookup(entry["agent"], agents, ("forbidden", position, "agent"), "agent")
        lookup(entry["task"], tasks, ("forbidden", position, "task"), "task")
        allowed.pop((entry["agent"], entry["task"]), None)
    return agents, tasks, allowed


class AssignmentSolver(BaseSolver):
    """Exact minimum-cost (or maximum-value) assignment; see the module docstring."""

    NAME = "optimization.assignment"
    COMPLEXITY = "O(n^3), n = agents/tasks, practical for n <= 500"
    SCHEMA = SCHEMA

    def _solve(self, problem: JsonObject) -> SolverPlan:
        agents, tasks, allowed = _pair_costs(problem)
        agents, tasks = sorted(agents), sorted(tasks)
        sign = -1.0 if problem.get("objective", "min") == "max" else 1.0
        pairs = _optimal_pairs(agents, tasks, {k: sign * v for k, v in allowed.items()})
        assignments = [{"agent": a, "task": t, "cost": allowed[a, t]} for a, t in pairs]
        used_agents = {a for a, _ in pairs}
        used_tasks = {t for _, t in pairs}
        plan: JsonObject = {
            "objective": problem.get("objective", "min"),
            "assignments": assignments,
            "total_cost": sum(item["cost"] for item in assignments),
            "unassigned_agents": [a for a in agents if a not in used_agents],
            "unassigned_tasks": [t for t in tasks if t not in used_tasks],
        }
        if problem.get("require_all_tasks") and plan["unassigned_tasks"]:
            missing = plan["unassigned_tasks"]
            raise fail(
                ("tasks",),
                f"{len(missing)} of {len(tasks)} tasks cannot be assigned: {', '.join(missing)}",
                "add agents, allow more agent-task pairs, or set require_all_tasks: false",
            )
        summary = (
            f"Assigned {len(assignments)} of {plural(len(tasks), 'task')} to "
            f"{len(agents)} agents, total cost {number_text(plan['total_cost'])} (optimal)"
        )
        if plan["unassigned_tasks"]:
            summary += f"; unassigned: {', '.join(plan['unassigned_tasks'])}"
        return SolverPlan(plan, 1.0, summary + ".")

    def _check(self, problem: JsonObject, plan: JsonObject) -> tuple[PlanCheck, ...]:
        agents, tasks, allowed = _pair_costs(problem)
        assignments = plan["assignments"]
        pairs = Findings("pairs-allowed")
        total = 0.0
        for item in assignments:
            key = (item["agent"], item["task"])
            pairs.require(key in allowed, f"pair {key[0]!r}/{key[1]!r} is not allowed")
            if key in allowed:
                pairs.require(
                    abs(allowed[key] - item["cost"]) <= EPSILON,
                    f"pair {key[0]!r}/{key[1]!r} costs {allowed[key]}, plan says {item['cost']}",
                )
                total += allowed[key]
        totals = Findings("total-cost-consistent")
        totals.require(
            abs(total - plan["total_cost"]) <= EPSILON * max(1.0, abs(total)),
            f"total_cost {plan['total_cost']} but the pairs cost {total}",
        )
        complete = Findings("all-tasks-assigned", critical=bool(problem.get("require_all_tasks")))
        done = {item["task"] for item in assignments}
        complete.require(
            not problem.get("require_all_tasks") or done >= set(tasks),
            f"tasks not assigned: {', '.join(sorted(set(tasks) - done))}",
        )
        return (
            at_most_once(
                "task-assigned-at-most-once", (i["task"] for i in assignments), tasks, "task"
            ),
            at_most_once(
                "agent-used-at-most-once", (i["agent"] for i in assignments), agents, "agent"
            ),
            pairs.result(),
            totals.result(),
            complete.result(),
        )


def _optimal_pairs(
    agents: list[str], tasks: list[str], cost: dict[tuple[str, str], float]
) -> list[tuple[str, str]]:
    """Maximum-cardinality, then minimum-cost matching over the allowed pairs."""
    if not agents or not tasks or not cost:
        return []
    values = np.array(list(cost.values()), dtype=float)
    spread = float(values.max() - values.min())
    # Any matching with one more allowed pair beats any with fewer, whatever the costs.
    penalty = float(values.max()) + (spread + 1.0) * (min(len(agents), len(tasks)) + 1)
    row = {agent: i for i, agent in enumerate(agents)}
    col = {task: j for j, task in enumerate(tasks)}
    matrix = np.full((len(agents), len(tasks)), penalty)
    for (agent, task), value in cost.items():
        matrix[row[agent], col[task]] = value
    rows, cols = linear_sum_assignment(matrix)
    return [
        (agents[r], tasks[c])
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True)
        if (agents[r], tasks[c]) in cost
    ]
