"""Minimum-cost flow (`optimization.min_cost_flow`).

Nodes carry an integer `supply` (positive: a source, negative: a demand, 0 or
absent: transit); supplies must balance. Arcs carry an integer `capacity` and
a non-negative unit `cost`. The solver routes every unit at least total cost
with successive shortest paths: Dijkstra on the residual network with node
potentials (reduced costs stay non-negative), augmenting by the path
bottleneck. With integer capacities it terminates with an integral optimum, so
confidence is 1.0. Nodes and arcs are ordered by id, so ties are broken by id.

When not all supply can reach the demands, `solve` raises `SolverError`
saying how many units could not be routed and where they are stuck.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from converge_dsl.solvers._common import (
    EPSILON,
    ID,
    NON_NEGATIVE,
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

SCHEMA = schema_document(
    "min_cost_flow",
    "A network: nodes with integer supply (+) or demand (-), arcs with integer "
    "capacity and non-negative unit cost. Supplies must sum to zero.",
    {
        "required": ["nodes", "arcs"],
        "additionalProperties": False,
        "properties": {
            "nodes": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["id"],
                    "additionalProperties": False,
                    "properties": {
                        "id": ID,
                        "supply": {
                            "description": "Units produced (positive) or consumed (negative).",
                            "type": "integer",
                            "default": 0,
                        },
                    },
                },
            },
            "arcs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["from", "to", "capacity", "cost"],
                    "additionalProperties": False,
                    "properties": {
                        "id": {**ID, "description": "Arc id; defaults to 'FROM->TO'."},
                        "from": ID,
                        "to": ID,
                        "capacity": {"type": "integer", "minimum": 0},
                        "cost": {**NON_NEGATIVE, "description": "Cost per unit of flow."},
                    },
                },
            },
        },
    },
)


@dataclass(frozen=True, slots=True)
class _Arc:
    id: str
    tail: str
    head: str
    capacity: int
    cost: float


def _parse(problem: JsonObject) -> tuple[dict[str, int], list[_Arc]]:
    """Supplies by node id and the arcs sorted by id; raises `SolverError`."""
    nodes = index_by_id(problem["nodes"], ("nodes",))
    supply = {ident: int(node.get("supply", 0)) for ident, node in sorted(nodes.items())}
    arcs: dict[str, _Arc] = {}
    for position, raw in enumerate(problem["arcs"]):
        tail = lookup(raw["from"], nodes, ("arcs", position, "from"), "node")
        head = lookup(raw["to"], nodes, ("arcs", position, "to"), "node")
        ident = raw.get("id", f"{tail}->{head}")
        if ident in arcs:
            hint = "give parallel arcs distinct ids" if "id" not in raw else None
            raise fail(("arcs", position, "id"), f"duplicate arc id {ident!r}", hint)
        arcs[ident] = _Arc(ident, tail, head, raw["capacity"], raw["cost"])
    produced = sum(s for s in supply.values() if s > 0)
    consumed = -sum(s for s in supply.values() if s < 0)
    if produced != consumed:
        raise fail(
            ("nodes",),
            f"supplies total {produced} but demands total {consumed}; they must balance",
            "add a dummy node that absorbs (or provides) the difference at cost 0",
        )
    return supply, [arcs[key] for key in sorted(arcs)]


class _Residual:
    """Residual network; edge e and e ^ 1 are each other's reverse."""

    def __init__(self, size: int) -> None:
        self.head: list[int] = []
        self.capacity: list[int] = []
        self.cost: list[float] = []
        self.out: list[list[int]] = [[] for _ in range(size)]

    def add(self, tail: int, head: int, capacity: int, cost: float) -> int:
        for a, b, cap, c in ((tail, head, capacity, cost), (head, tail, 0, -cost)):
            self.out[a].append(len(self.head))
            self.head.append(b)
            self.capacity.append(cap)
            self.cost.append(c)
        return len(self.head) - 2

    def shortest_path(self, source: int, potential: list[float]) -> tuple[list[float], list[int]]:
        """Dijkstra on reduced costs; returns distances and the edge into each node."""
        dist = [math.inf] * len(self.out)
        via = [-1] * len(self.out)
        dist[source] = 0.0
        queue = [(0.0, source)]
        while queue:
            d, u = heapq.heappop(queue)
            if d > dist[u]:
                continue
            for e in self.out[u]:
                if self.capacity[e] <= 0:
                    continue
                v = self.head[e]
                # Rounding can make a reduced cost a hair below zero; it is zero.
                nd = d + max(0.0, self.cost[e] + potential[u] - potential[v])
                if nd < dist[v]:
                    dist[v], via[v] = nd, e
                    heapq.heappush(queue, (nd, v))
        return dist, via


def _min_cost_flow(
    supply: dict[str, int], arcs: list[_Arc]
) -> tuple[dict[str, int], dict[str, int]]:
    """Flow per arc id, and units left unrouted per node id (empty when feasible)."""
    index = {ident: i for i, ident in enumerate(supply)}
    source, sink = len(index), len(index) + 1
    net = _Residual(len(index) + 2)
    edge_of = {
        arc.id: net.add(index[arc.tail], index[arc.head], arc.capacity, arc.cost) for arc in arcs
    }
    terminal = {
        ident: net.add(source, index[ident], s, 0.0)
        if s > 0
        else net.add(index[ident], sink, -s, 0.0)
        for ident, s in supply.items()
        if s != 0
    }
    potential = [0.0] * (len(index) + 2)
    remaining = sum(s for s in supply.values() if s > 0)
    while remaining > 0:
        dist, via = net.shortest_path(source, potential)
        if math.isinf(dist[sink]):
            break
        potential = [
            p + d if not math.isinf(d) else p for p, d in zip(potential, dist, strict=True)
        ]
        path, node = [], sink
        while node != source:
            e = via[node]
            path.append(e)
            node = net.head[e ^ 1]
        push = min(remaining, *(net.capacity[e] for e in path))
        for e in path:
            net.capacity[e] -= push
            net.capacity[e ^ 1] += push
        remaining -= push
    flows = {ident: net.capacity[e ^ 1] for ident, e in edge_of.items()}
    stuck = {ident: net.capacity[e] for ident, e in terminal.items() if net.capacity[e] > 0}
    return flows, stuck


class MinCostFlowSolver(BaseSolver):
    """Exact min-cost flow by successive shortest paths; see the module docstring."""

    NAME = "optimization.min_cost_flow"
    COMPLEXITY = (
        "O(F * E log V), F = total supply (each augmentation routes >= 1 unit), "
        "practical for F * E <= 10^7"
    )
    SCHEMA = SCHEMA

    def _solve(self, problem: JsonObject) -> SolverPlan:
        supply, arcs = _parse(problem)
        flows, stuck = _min_cost_flow(supply, arcs)
        total = sum(s for s in supply.values() if s > 0)
        if stuck:
            unrouted = sum(units for ident, units in stuck.items() if supply[ident] > 0)
            detail = ", ".join(
                f"{ident} ({'unshipped supply' if supply[ident] > 0 else 'unmet demand'} {units})"
                for ident, units in stuck.items()
            )
            raise fail(
                ("arcs",),
                f"infeasible: {unrouted} of {total} units could not be routed; stuck at {detail}",
                "raise arc capacities or add arcs between those nodes",
            )
        used = [
            {
                "arc": arc.id,
                "from": arc.tail,
                "to": arc.head,
                "flow": flows[arc.id],
                "capacity": arc.capacity,
                "unit_cost": arc.cost,
                "cost": flows[arc.id] * arc.cost,
            }
            for arc in arcs
            if flows[arc.id] > 0
        ]
        cost = sum(arc.cost * flows[arc.id] for arc in arcs)
        plan = {"flows": used, "total_flow": total, "total_cost": cost}
        summary = (
            f"Routed {plural(total, 'unit')} over {plural(len(used), 'arc')} at minimum total "
            f"cost {number_text(cost)}."
        )
        return SolverPlan(plan, 1.0, summary)

    def _check(self, problem: JsonObject, plan: JsonObject) -> tuple[PlanCheck, ...]:
        supply, arcs = _parse(problem)
        by_id = {arc.id: arc for arc in arcs}
        flow = dict.fromkeys(by_id, 0)
        capacity = Findings("capacity-respected")
        total = 0.0
        for entry in plan["flows"]:
            arc = by_id.get(entry["arc"])
            if arc is None:
                continue  # reported by the at-most-once check
            units = entry["flow"]
            capacity.require(
                isinstance(units, int) and 0 <= units <= arc.capacity,
                f"arc {arc.id!r} carries {units}, capacity is {arc.capacity}",
            )
            flow[arc.id] += units
            total += units * arc.cost
        balance = Findings("flow-conserved")
        net = dict.fromkeys(supply, 0)
        for arc in arcs:
            net[arc.tail] += flow[arc.id]
            net[arc.head] -= flow[arc.id]
        for ident, s in supply.items():
            balance.require(
                net[ident] == s, f"node {ident!r} sends {net[ident]} net, supply is {s}"
            )
        totals = Findings("total-cost-consistent")
        totals.require(
            abs(total - plan["total_cost"]) <= EPSILON * max(1.0, abs(total)),
            f"total_cost {plan['total_cost']} but the arc flows cost {total}",
        )
        return (
            at_most_once(
                "arc-listed-at-most-once", (f["arc"] for f in plan["flows"]), by_id, "arc"
            ),
            capacity.result(),
            balance.result(),
            totals.result(),
            _optimality(supply, arcs, flow),
        )


def _optimality(supply: dict[str, int], arcs: list[_Arc], flow: dict[str, int]) -> PlanCheck:
    """Advisory: a flow is cost-minimal iff its residual network has no negative cycle."""
    findings = Findings("cost-minimal", critical=False)
    residual = [(a.tail, a.head, a.cost) for a in arcs if flow[a.id] < a.capacity]
    residual += [(a.head, a.tail, -a.cost) for a in arcs if flow[a.id] > 0]
    if len(supply) * max(1, len(residual)) > 10_000_000:
        return findings.result()  # Bellman-Ford would be too slow; not checked.
    dist = dict.fromkeys(supply, 0.0)
    for _ in range(len(supply)):
        changed = False
        for tail, head, cost in residual:
            if dist[tail] + cost < dist[head] - EPSILON:
                dist[head] = dist[tail] + cost
                changed = True
        if not changed:
            return findings.result()
    findings.add("the residual network has a negative-cost cycle: rerouting would cost less")
    return findings.result()
