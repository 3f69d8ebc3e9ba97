"""The min-cost flow network: its parsed form and the exact reference algorithm.

`parse_network` checks and orders a problem's nodes and arcs.
`successive_shortest_paths` is pure Python, O(F * E log V) for F units of
supply: Dijkstra on reduced costs over a residual network, with node
potentials. `flow.py` uses it as the fallback when the linear programme's
answer fails verification.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from converge_dsl.solvers._common import JsonObject, fail, index_by_id, lookup


@dataclass(frozen=True, slots=True)
class Arc:
    """One arc of the network: `capacity` units at `cost` each, from `tail` to `head`."""

    id: str
    tail: str
    head: str
    capacity: int
    cost: float


def parse_network(problem: JsonObject) -> tuple[dict[str, int], list[Arc]]:
    """Supplies by node id and the arcs sorted by id; raises `SolverError`."""
    nodes = index_by_id(problem["nodes"], ("nodes",))
    supply = {ident: int(node.get("supply", 0)) for ident, node in sorted(nodes.items())}
    arcs: dict[str, Arc] = {}
    for position, raw in enumerate(problem["arcs"]):
        tail = lookup(raw["from"], nodes, ("arcs", position, "from"), "node")
        head = lookup(raw["to"], nodes, ("arcs", position, "to"), "node")
        ident = raw.get("id", f"{tail}->{head}")
        if ident in arcs:
            hint = "give parallel arcs distinct ids" if "id" not in raw else None
            raise fail(("arcs", position, "id"), f"duplicate arc id {ident!r}", hint)
        arcs[ident] = Arc(ident, tail, head, raw["capacity"], raw["cost"])
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


def successive_shortest_paths(
    supply: dict[str, int], arcs: list[Arc]
) -> tuple[dict[str, int], dict[str, int]]:
    """The reference algorithm: flow per arc id, and units left unrouted per node id
    (empty when every unit was routed). Exact, pure Python: O(F * E log V), F = supply."""
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
