"""Minimum-cost flow (`optimization.min_cost_flow`).

Nodes carry an integer `supply` (positive: a source, negative: a demand, 0 or
absent: transit); supplies must balance. Arcs carry an integer `capacity` and
a non-negative unit cost. The problem is solved as a linear programme with
HiGHS (dual simplex) over the sparse node-arc incidence matrix. That matrix is
totally unimodular, so the optimal vertex is integral; the rounded answer is
then verified exactly: integer flows within capacities, conservation at every
node, and an optimality certificate (node potentials, warm-started from the
LP duals, under which no residual arc has negative reduced cost, i.e. no
negative-cost cycle). An answer that fails verification is replaced by the
exact successive-shortest-paths algorithm (Dijkstra with potentials), so
confidence is 1.0 either way. Nodes and arcs are ordered by id before the LP
is built, so reordered input gives the same plan.

When not all supply can reach the demands, `solve` raises `SolverError`
saying how many units could not be routed and where they are stuck (from a
maximum-flow LP certified by a cut, or from the fallback).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog
from scipy.sparse import csc_array, csr_array, eye_array, hstack
from scipy.sparse.csgraph import breadth_first_order

from converge_dsl.solvers._common import (
    EPSILON,
    ID,
    NON_NEGATIVE,
    BaseSolver,
    Findings,
    JsonObject,
    at_most_once,
    fail,
    number_text,
    plural,
    schema_document,
)
from converge_dsl.solvers._flow_network import Arc, parse_network, successive_shortest_paths
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


Routing = tuple[dict[str, int], dict[str, int]]
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Numbers = npt.NDArray[np.int64] | npt.NDArray[np.float64]

# Up to this magnitude float64 (the LP's number type) holds every integer exactly.
_EXACT_LIMIT = 2**53
# HiGHS presolve costs several times the solve itself on network LPs.
_HIGHS = {"presolve": False}


@dataclass(frozen=True, slots=True)
class _Network:
    """The id-ordered network as arrays: arc k runs node tail[k] -> node head[k]."""

    nodes: list[str]
    supply: IntArray
    tail: IntArray
    head: IntArray
    capacity: IntArray
    cost: FloatArray

    @staticmethod
    def of(supply: dict[str, int], arcs: list[Arc]) -> _Network:
        index = {ident: i for i, ident in enumerate(supply)}
        return _Network(
            list(supply),
            np.array(list(supply.values()), dtype=np.int64),
            np.array([index[arc.tail] for arc in arcs], dtype=np.int64),
            np.array([index[arc.head] for arc in arcs], dtype=np.int64),
            np.array([arc.capacity for arc in arcs], dtype=np.int64),
            np.array([arc.cost for arc in arcs], dtype=np.float64),
        )

    def incidence(self) -> csc_array:
        """Node-arc incidence: +1 at the tail's row, -1 at the head's row."""
        arcs = len(self.tail)
        signs = np.concatenate([np.ones(arcs), -np.ones(arcs)])
        places = (np.concatenate([self.tail, self.head]), np.tile(np.arange(arcs), 2))
        return csc_array((signs, places), shape=(len(self.nodes), arcs))

    def net_outflow(self, flow: IntArray) -> IntArray:
        """Units leaving minus units entering each node, in exact integers."""
        out = np.zeros(len(self.nodes), dtype=np.int64)
        np.add.at(out, self.tail, flow)
        np.subtract.at(out, self.head, flow)
        return out

    def usable(self) -> IntArray:
        """Arc capacities, a self-loop's set to 0 (it never helps; keeps the LP canonical)."""
        return np.where(self.tail == self.head, 0, self.capacity)


def _linprog(
    cost: FloatArray, matrix: csc_array, rhs: FloatArray, upper: IntArray
) -> tuple[IntArray | None, Any]:
    """min cost.x, matrix x = rhs, 0 <= x <= upper by HiGHS: the result and its x
    rounded, or None (no optimum, or a rounded value outside [0, upper])."""
    result = linprog(
        cost,
        A_eq=matrix,
        b_eq=rhs,
        bounds=np.column_stack([np.zeros(len(upper)), upper]),
        method="highs-ds",
        options=_HIGHS,
    )
    if result.status != 0:
        return None, result
    rounded = np.rint(result.x).astype(np.int64)
    inside = bool(((rounded >= 0) & (rounded <= upper)).all())
    return (rounded if inside else None), result


def _no_negative_cycle(
    nodes: int, tails: IntArray, heads: IntArray, costs: FloatArray, start: FloatArray
) -> bool:
    """Bellman-Ford (vectorised, rounds of relaxing every arc) from potentials `start`.

    True iff the potentials settle, i.e. the arcs hold no cycle of negative cost.
    Good starting potentials (LP duals) settle in a round or two.
    """
    dist = start.copy()
    for _ in range(nodes + 1):
        candidate = dist[tails] + costs
        better = candidate < dist[heads] - EPSILON
        if not better.any():
            return True
        np.minimum.at(dist, heads[better], candidate[better])
    return False


def _residual(
    tail: IntArray, head: IntArray, cost: FloatArray, upper: Numbers, flow: Numbers
) -> tuple[IntArray, IntArray, FloatArray]:
    """Residual arcs (tails, heads, costs): unsaturated arcs forward, used arcs backward."""
    forward, backward = flow < upper, flow > 0
    return (
        np.concatenate([tail[forward], head[backward]]),
        np.concatenate([head[forward], tail[backward]]),
        np.concatenate([cost[forward], -cost[backward]]),
    )


def _lp_min_cost(net: _Network) -> IntArray | None:
    """The LP's optimal flow when it verifies exactly; None when infeasible or unverified."""
    upper = net.usable()
    flow, result = _linprog(net.cost, net.incidence(), net.supply.astype(np.float64), upper)
    if flow is None or not np.array_equal(net.net_outflow(flow), net.supply):
        return None
    tails, heads, costs = _residual(net.tail, net.head, net.cost, upper, flow)
    # The equality duals y price the nodes; -y are shortest-path potentials.
    start = -np.asarray(result.eqlin.marginals, dtype=np.float64)
    return flow if _no_negative_cycle(len(net.nodes), tails, heads, costs, start) else None


def _lp_stuck(net: _Network) -> dict[str, int] | None:
    """Units a maximum flow leaves unrouted per node id; None when unverified.

    Terminal variables s (supply shipped) and t (demand met) join the arcs:
    outflow - s + t = 0 at every node, maximise sum(s). The answer is verified
    exactly and certified maximal by a cut: no residual path leads from spare
    supply to unmet demand.
    """
    sources, sinks = np.flatnonzero(net.supply > 0), np.flatnonzero(net.supply < 0)
    nodes, arcs = len(net.nodes), len(net.tail)
    identity = eye_array(nodes, format="csc")
    upper = np.concatenate([net.usable(), net.supply[sources], -net.supply[sinks]])
    values, _ = _linprog(
        np.concatenate([np.zeros(arcs), -np.ones(len(sources)), np.zeros(len(sinks))]),
        hstack([net.incidence(), -identity[:, sources], identity[:, sinks]], format="csc"),
        np.zeros(nodes),
        upper,
    )
    if values is None:
        return None
    flow, shipped, met = np.split(values, [arcs, arcs + len(sources)])
    balance = np.zeros(nodes, dtype=np.int64)
    balance[sources] += shipped
    balance[sinks] -= met
    if not np.array_equal(net.net_outflow(flow), balance):
        return None
    spare = np.zeros(nodes, dtype=np.int64)
    spare[sources] = net.supply[sources] - shipped
    spare[sinks] = -net.supply[sinks] - met
    tails, heads, _ = _residual(net.tail, net.head, net.cost, upper[:arcs], flow)
    start = sources[spare[sources] > 0]
    tails = np.concatenate([tails, np.full(len(start), nodes)])
    heads = np.concatenate([heads, start])
    graph = csr_array((np.ones(len(tails)), (tails, heads)), shape=(nodes + 1, nodes + 1))
    reached = breadth_first_order(graph, nodes, directed=True, return_predecessors=False)
    if bool((spare[sinks[np.isin(sinks, reached)]] > 0).any()):
        return None  # an augmenting path remains: not a maximum flow
    return {net.nodes[i]: int(spare[i]) for i in np.flatnonzero(spare > 0)}


def min_cost_flow(supply: dict[str, int], arcs: list[Arc]) -> Routing:
    """Flow per arc id, and units left unrouted per node id (empty when feasible).

    The LP answer, verified exactly; the successive-shortest-paths algorithm
    whenever verification fails (and for trivial or out-of-range networks).
    When the network is infeasible the flows are empty: only the unrouted map
    is meaningful.
    """
    numbers = [abs(s) for s in supply.values()] + [arc.capacity for arc in arcs]
    if not arcs or not any(supply.values()) or max(numbers) >= _EXACT_LIMIT:
        return successive_shortest_paths(supply, arcs)
    net = _Network.of(supply, arcs)
    flow = _lp_min_cost(net)
    if flow is not None:
        return dict(zip((arc.id for arc in arcs), flow.tolist(), strict=True)), {}
    stuck = _lp_stuck(net)
    if stuck:
        return {}, stuck
    return successive_shortest_paths(supply, arcs)


class MinCostFlowSolver(BaseSolver):
    """Exact min-cost flow: a verified HiGHS LP; see the module docstring.

    `method="ssp"` runs only the reference successive-shortest-paths algorithm
    (the fallback; benchmarks compare against it).
    """

    NAME = "optimization.min_cost_flow"
    COMPLEXITY = (
        "LP by HiGHS dual simplex on the V x E incidence matrix plus an O(E) exact "
        "verification (about 0.1 s at E = 22k, 5 s at E = 220k); practical for "
        "E <= 3 * 10^5. Fallback: successive shortest paths, O(F * E log V)"
    )
    SCHEMA = SCHEMA

    def __init__(self, method: Literal["lp", "ssp"] = "lp") -> None:
        self._route: Callable[[dict[str, int], list[Arc]], Routing] = (
            min_cost_flow if method == "lp" else successive_shortest_paths
        )

    def _solve(self, problem: JsonObject) -> SolverPlan:
        supply, arcs = parse_network(problem)
        flows, stuck = self._route(supply, arcs)
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
        supply, arcs = parse_network(problem)
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


def _optimality(supply: dict[str, int], arcs: list[Arc], flow: dict[str, int]) -> PlanCheck:
    """Advisory: a flow is cost-minimal iff its residual network has no negative cycle."""
    findings = Findings("cost-minimal", critical=False)
    if len(supply) * max(1, 2 * len(arcs)) > 200_000_000:
        return findings.result()  # Bellman-Ford would be too slow; not checked.
    net = _Network.of(supply, arcs)
    units = np.array([flow[arc.id] for arc in arcs], dtype=np.float64)
    tails, heads, costs = _residual(
        net.tail, net.head, net.cost, net.capacity.astype(np.float64), units
    )
    if not _no_negative_cycle(len(supply), tails, heads, costs, np.zeros(len(supply))):
        findings.add("the residual network has a negative-cost cycle: rerouting would cost less")
    return findings.result()
