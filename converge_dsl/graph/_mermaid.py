"""The graph as a Mermaid flowchart (`graph --format mermaid`), left to right.

Keys are stadiums, suggestors rectangles styled by kind (`classDef`), models
cylinders, packs hexagons. `reads`/`writes` are solid arrows, `calls` and
`provides` dotted ones. An unreachable key, a suggestor that never fires and an
unused model or pack get the `unreachable` class (dashed, red). Invariants are
a subgraph of notes. Labels are quoted, with entities for the
characters its syntax reserves (HTML entities, see `escape`).
"""

from __future__ import annotations

from ._model import Node, PipelineGraph
from ._text import header, invariant_line, short_ids, subtitle

_SHAPES = {"key": ('(["', '"])'), "suggestor": ('["', '"]'), "model": ('[("', '")]')}
_SHAPES["pack"] = ('{{"', '"}}')
_ARROWS = {"reads": "-->", "writes": "-->", "calls": "-.->", "provides": "-.->"}
CLASSES = (
    ("key", "fill:#ffffff,stroke:#64748b,color:#0f172a"),
    ("seed", "fill:#dcfce7,stroke:#16a34a,color:#14532d"),
    ("rule", "fill:#dbeafe,stroke:#2563eb,color:#1e3a8a"),
    ("llm", "fill:#f3e8ff,stroke:#9333ea,color:#581c87"),
    ("agent", "fill:#ffedd5,stroke:#ea580c,color:#7c2d12"),
    ("pack", "fill:#ccfbf1,stroke:#0d9488,color:#134e4a"),
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


def _class(node: Node) -> str:
    if node.kind == "suggestor":
        return node.style if node.style in {name for name, _ in CLASSES} else "rule"
    return {"key": "key", "model": "model", "pack": "packsource"}[node.kind]


def render(graph: PipelineGraph) -> str:
    """The Mermaid text of `graph`, ending with a newline."""
    ids = short_ids(graph)
    lines = [header(graph, "mermaid"), "flowchart LR"]
    for node in graph.nodes:
        opening, closing = _SHAPES[node.kind]
        label = f"{escape(node.name)}<br/><small>{escape(subtitle(node))}</small>"
        lines.append(f"  {ids[node.id]}{opening}{label}{closing}")
    for edge in graph.edges:
        arrow = _ARROWS[edge.relation]
        text = f"|{edge.relation}|" if edge.relation in ("calls", "provides") else ""
        lines.append(f"  {ids[edge.source]} {arrow}{text} {ids[edge.target]}")
    if graph.invariants:
        lines.append('  subgraph invariants["invariants"]')
        for index, invariant in enumerate(graph.invariants):
            lines.append(f'    i{index}["{escape(invariant_line(invariant))}"]')
        lines.append("  end")
    lines += [f"  classDef {name} {style}" for name, style in CLASSES]
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
