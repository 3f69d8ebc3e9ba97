"""A layered left-to-right layout of a pipeline graph, for the HTML page's SVG.

The flow (keys and suggestors, joined by `reads` and `writes`) is laid out
in the Sugiyama way, in four small steps:

1. cycles are broken by reversing the back edges of a depth-first search
   (a suggestor reading and writing one key is such a cycle);
2. layers by longest path from the sources, then each source moved right
   next to its first reader (a seeded key sits just before the suggestor
   reading it, not at the far left);
3. edges spanning several layers get dummy points, and the order within each
   layer is improved by barycentre sweeps;
4. vertical positions pull each node towards the mean of its neighbours,
   keeping the order and a minimum gap (pool adjacent violators, least squares).

Packs sit in a band above the flow and models in a band below, each near the
suggestors it serves. Node sizes are estimated from the label lengths.
Deterministic: the same graph gives the same coordinates.
"""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from converge_dsl._page_assets import page_text

from ._model import Node, PipelineGraph
from ._text import label_name, subtitle

LAYER_GAP = 64.0
NODE_GAP = 26.0
BAND_GAP = 84.0
MARGIN = 24.0
_SWEEPS = 8


@dataclass(frozen=True, slots=True)
class Box:
    """A node's rectangle: `x`, `y` is its top-left corner."""

    x: float
    y: float
    width: float
    height: float

    @property
    def cx(self) -> float:
        return self.x + self.width / 2

    @property
    def cy(self) -> float:
        return self.y + self.height / 2


@dataclass(frozen=True, slots=True)
class Layout:
    """Boxes by node id, the size, and for the flow edges: the points each passes
    through (its dummies, keyed by the edge as laid out) and the edges that were
    reversed to break cycles (keyed as in the graph; drawn as arcs below)."""

    boxes: dict[str, Box]
    bends: dict[tuple[str, str], tuple[tuple[float, float], ...]]
    reversed_edges: frozenset[tuple[str, str]]
    width: float
    height: float


def size_of(node: Node) -> tuple[float, float]:
    """An estimate of the rendered label's box (13px bold name, 11px subtitle), from the
    text as drawn (a hidden character is drawn as its `⟨U+XXXX⟩`, eight characters)."""
    text = max(len(label_name(node)) * 7.9, len(page_text(subtitle(node))) * 6.1)
    return max(112.0, round(text + 34.0)), (50.0 if node.kind == "suggestor" else 44.0)


def _break_cycles(order: Sequence[str], edges: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
    """The back edges of an iterative depth-first search started at the sources first."""
    successors: dict[str, list[str]] = defaultdict(list)
    has_parent = {v for _, v in edges}
    for u, v in edges:
        successors[u].append(v)
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    back: set[tuple[str, str]] = set()
    starts = [n for n in order if n not in has_parent] + list(order)
    for start in starts:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(successors[start]))]
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(successors[child])))
    return back


def _layers(order: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layers of an acyclic graph, sources then moved next to their readers."""
    preds: dict[str, list[str]] = defaultdict(list)
    succs: dict[str, list[str]] = defaultdict(list)
    for u, v in edges:
        preds[v].append(u)
        succs[u].append(v)
    layer: dict[str, int] = {}
    indegree = {n: len(preds[n]) for n in order}
    ready = deque(n for n in order if indegree[n] == 0)
    while ready:
        node = ready.popleft()
        layer[node] = max((layer[p] + 1 for p in preds[node]), default=0)
        for child in succs[node]:
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    for node in order:
        if not preds[node] and succs[node]:
            layer[node] = min(layer[c] for c in succs[node]) - 1
    return layer


def _pava(desired: Sequence[float], gaps: Sequence[float]) -> list[float]:
    """Positions closest (least squares) to `desired`, in order, each at least `gaps[i]`
    after the previous one (`gaps[0]` unused)."""
    offsets, total = [], 0.0
    for index, gap in enumerate(gaps):
        total += gap if index else 0.0
        offsets.append(total)
    blocks: list[list[float]] = []  # [sum, count]
    for value, offset in zip(desired, offsets, strict=True):
        blocks.append([value - offset, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total_sum, count = blocks.pop()
            blocks[-1][0] += total_sum
            blocks[-1][1] += count
    out: list[float] = []
    for block_sum, count in blocks:
        out += [block_sum / count] * int(count)
    return [z + offset for z, offset in zip(out, offsets, strict=True)]


class _Flow:
    """Steps 3 and 4 of the module docstring, over the flow's nodes and dummies."""

    def __init__(self, layer: dict[str, int], edges: Sequence[tuple[str, str]]) -> None:
        self.layer = dict(layer)
        self.size: dict[str, tuple[float, float]] = {}
        self.chains: dict[tuple[str, str], list[str]] = {}
        self.neighbours: dict[str, list[str]] = defaultdict(list)
        for u, v in edges:
            chain = [u]
            for step in range(self.layer[u] + 1, self.layer[v]):
                dummy = f"\0{u}\0{v}\0{step}"
                self.layer[dummy] = step
                self.size[dummy] = (0.0, 8.0)
                chain.append(dummy)
            chain.append(v)
            self.chains[(u, v)] = chain
            for a, b in itertools.pairwise(chain):
                self.neighbours[a].append(b)
                self.neighbours[b].append(a)
        count = max(self.layer.values(), default=-1) + 1
        self.rows: list[list[str]] = [[] for _ in range(count)]
        for node in self.layer:
            self.rows[self.layer[node]].append(node)

    def order(self) -> None:
        """Barycentre sweeps, down then up: each node moves to the mean index of its
        neighbours in the layer swept from."""
        for sweep in range(_SWEEPS):
            down = sweep % 2 == 0
            indices = range(1, len(self.rows)) if down else range(len(self.rows) - 2, -1, -1)
            for index in indices:
                row = self.rows[index]
                fixed = {n: i for i, n in enumerate(self.rows[index - 1 if down else index + 1])}
                current = {n: float(i) for i, n in enumerate(row)}
                centre = {}
                for node in row:
                    places = [fixed[m] for m in self.neighbours[node] if m in fixed]
                    centre[node] = sum(places) / len(places) if places else current[node]
                row.sort(key=lambda n: (centre[n], current[n]))

    def place(self) -> tuple[dict[str, float], dict[str, float]]:
        """Centre x of each layer's column and centre y of each node."""
        widths = [max((self.size[n][0] for n in row), default=0.0) for row in self.rows]
        xs, left = [], MARGIN
        for width in widths:
            xs.append(left + width / 2)
            left += width + LAYER_GAP
        cx = {n: xs[self.layer[n]] for n in self.layer}
        cy: dict[str, float] = {}
        for row in self.rows:
            cy.update(zip(row, self._stack(row, [0.0] * len(row)), strict=True))
        for _ in range(_SWEEPS):
            for row in self.rows:
                desired = [
                    sum(cy[m] for m in self.neighbours[n]) / len(self.neighbours[n])
                    if self.neighbours[n]
                    else cy[n]
                    for n in row
                ]
                cy.update(zip(row, self._stack(row, desired), strict=True))
        return cx, cy

    def _stack(self, row: list[str], desired: list[float]) -> list[float]:
        gaps = [
            0.0 if i == 0 else (self.size[row[i - 1]][1] + self.size[n][1]) / 2 + NODE_GAP
            for i, n in enumerate(row)
        ]
        return _pava(desired, gaps)


def _band(graph: PipelineGraph, kind: str, cx: dict[str, float]) -> list[tuple[str, float]]:
    """The nodes of a side band with their centre x, near the suggestors they serve."""
    nodes = [n for n in graph.nodes if n.kind == kind]
    served: dict[str, list[float]] = defaultdict(list)
    for edge in graph.edges:
        if edge.source in cx and edge.target not in cx:
            served[edge.target].append(cx[edge.source])
        elif edge.target in cx and edge.source not in cx:
            served[edge.source].append(cx[edge.target])
    wanted = [sum(served[n.id]) / len(served[n.id]) if served[n.id] else MARGIN for n in nodes]
    ranked = sorted(range(len(nodes)), key=lambda i: (wanted[i], i))
    widths = [size_of(nodes[i])[0] for i in ranked]
    gaps = [
        0.0 if k == 0 else (widths[k - 1] + widths[k]) / 2 + NODE_GAP for k in range(len(ranked))
    ]
    placed = _pava([wanted[i] for i in ranked], gaps)
    return [(nodes[i].id, x) for i, x in zip(ranked, placed, strict=True)]


def layout(graph: PipelineGraph) -> Layout:
    """The coordinates of every node of `graph` (see the module docstring)."""
    flow_ids = [n.id for n in graph.nodes if n.kind in ("key", "suggestor")]
    flow_edges = list(
        dict.fromkeys(
            (e.source, e.target)
            for e in graph.edges
            if e.relation in ("reads", "writes", "informs")
        )
    )
    back = _break_cycles(flow_ids, flow_edges)
    acyclic = list(dict.fromkeys((v, u) if (u, v) in back else (u, v) for u, v in flow_edges))
    flow = _Flow(_layers(flow_ids, acyclic), acyclic)
    sizes = {n.id: size_of(n) for n in graph.nodes}
    flow.size.update({n: sizes[n] for n in flow_ids})
    flow.order()
    cx, cy = flow.place()
    packs, models = _band(graph, "pack", cx), _band(graph, "model", cx)
    top = min((cy[n] - flow.size[n][1] / 2 for n in flow.layer), default=MARGIN)
    bottom = max((cy[n] + flow.size[n][1] / 2 for n in flow.layer), default=MARGIN)
    band_y: dict[str, float] = {}
    band_y.update({node: top - BAND_GAP - 22 for node, _ in packs})
    band_y.update({node: bottom + BAND_GAP + 22 for node, _ in models})
    cx.update(dict(packs + models))
    cy.update(band_y)
    boxes = {node: Box(cx[node] - w / 2, cy[node] - h / 2, w, h) for node, (w, h) in sizes.items()}
    return _normalised(boxes, flow, cx, cy, back)


def _normalised(
    boxes: dict[str, Box],
    flow: _Flow,
    cx: dict[str, float],
    cy: dict[str, float],
    back: set[tuple[str, str]],
) -> Layout:
    """Shift everything so the drawing starts at the margin; collect the edge bends."""
    left = min((b.x for b in boxes.values()), default=0.0) - MARGIN
    top = min((b.y for b in boxes.values()), default=0.0) - MARGIN
    moved = {n: Box(b.x - left, b.y - top, b.width, b.height) for n, b in boxes.items()}
    bends = {
        edge: tuple((cx[d] - left, cy[d] - top) for d in chain[1:-1])
        for edge, chain in flow.chains.items()
    }
    width = max((b.x + b.width for b in moved.values()), default=0.0) + MARGIN
    height = max((b.y + b.height for b in moved.values()), default=0.0) + MARGIN
    if back:  # room for the arcs drawn under the flow
        height += 40.0
    return Layout(moved, bends, frozenset(back), width, height)
