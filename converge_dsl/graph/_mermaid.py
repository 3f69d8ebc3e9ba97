"""The graph as a Mermaid flowchart (`graph --format mermaid`), left to right.

Keys are stadiums, suggestors rectangles styled by kind (`classDef`), models
cylinders, packs hexagons. `reads`/`writes` are solid arrows, `informs`,
`calls`, `summarizes` and `provides` dotted ones with their name. An
unreachable key, a suggestor that never fires and an unused model or pack get
the `unreachable` class (dashed, red). Invariants are a subgraph of notes.
Labels are quoted, with entities for the characters its syntax reserves (HTML
entities, see `escape`).
"""

from __future__ import annotations

from ._model import Node, PipelineGraph
from ._text import header, invariant_line, short_ids, subtitle

_SHAPES = {"key": ('(["', '"])'), "suggestor": ('["', '"]'), "model": ('[("', '")]')}
_SHAPES["pack"] = _HEXAGON = ('{{"', '"}}')
_ARROWS = {
    "reads": "-->",
    "writes": "-->",
    "informs": "-.->",
    "calls": "-.->",
    "summarizes": "-.->",
    "provides": "-.->",
}
_LABELLED = ("informs", "calls", "summarizes", "provides")
_KEY = ("key", "fill:#ffffff,stroke:#64748b,color:#0f172a")
_OTHERS = (
    ("model", "fill:#f1f5f9,stroke:#475569,color:#1e293b"),
    ("packsource", "fill:#fef9c3,stroke:#ca8a04,color:#713f12"),
    ("invariant", "fill:#fff7ed,stroke:#c2410c,color:#431407"),
    ("unreachable", "stroke:#dc2626,stroke-width:2px,stroke-dasharray:5 4,color:#991b1b"),
)


_ENTITIES = {"&": "&amp;", "#": "&num;", '"': "&quot;", "<": "&lt;", ">": "&gt;"}


def escape(text: str) -> str:
    """`text` inside a quoted Mermaid label, as HTML entities.

    Mermaid 11 turns its own `#code;` escapes inside quoted labels into stray
    placeholders, but reads HTML entities; `#` becomes `&num;` so no text of
    ours looks like one of its escapes.
    """
    return "".join(_ENTITIES.get(char, char) for char in text)


def classes(graph: PipelineGraph) -> tuple[tuple[str, str], ...]:
    """The `classDef`s: keys, one per suggestor kind (its own style), then the rest."""
    kinds = tuple(
        (name, f"fill:{style.fill},stroke:{style.stroke},color:{style.text}")
        for name, style in graph.styles
    )
    return (_KEY, *kinds, *_OTHERS)


def _class(node: Node) -> str:
    if node.kind == "suggestor":
        return node.style  # each kind has its class (`classes`)
    return {"key": "key", "model": "model", "pack": "packsource"}[node.kind]


def _shape(graph: PipelineGraph, node: Node) -> tuple[str, str]:
    style = graph.style_of(node)
    return _HEXAGON if style is not None and style.shape == "hexagon" else _SHAPES[node.kind]


def render(graph: PipelineGraph) -> str:
    """The Mermaid text of `graph`, ending with a newline."""
    ids = short_ids(graph)
    lines = [header(graph, "mermaid"), "flowchart LR"]
    for node in graph.nodes:
        opening, closing = _shape(graph, node)
        label = f"{escape(node.name)}<br/><small>{escape(subtitle(node))}</small>"
        lines.append(f"  {ids[node.id]}{opening}{label}{closing}")
    for edge in graph.edges:
        arrow = _ARROWS[edge.relation]
        text = f"|{edge.relation}|" if edge.relation in _LABELLED else ""
        lines.append(f"  {ids[edge.source]} {arrow}{text} {ids[edge.target]}")
    if graph.invariants:
        lines.append('  subgraph invariants["invariants"]')
        for index, invariant in enumerate(graph.invariants):
            lines.append(f'    i{index}["{escape(invariant_line(invariant))}"]')
        lines.append("  end")
    lines += [f"  classDef {name} {style}" for name, style in classes(graph)]
    groups: dict[str, list[str]] = {}
    for node in graph.nodes:
        groups.setdefault(_class(node), []).append(ids[node.id])
    lines += [f"  class {','.join(members)} {name}" for name, members in groups.items()]
    if graph.invariants:
        lines.append(f"  class {','.join(f'i{i}' for i in range(len(graph.invariants)))} invariant")
    dead = [ids[node.id] for node in graph.nodes if not node.reachable]
    if dead:
        lines.append(f"  class {','.join(dead)} unreachable")
    return "\n".join(lines) + "\n"
