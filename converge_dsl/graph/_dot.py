"""The graph in Graphviz DOT (`graph --format dot`), left to right.

Node ids are the graph's own (`key:seeds`, `suggestor:classify`), quoted.
Keys are ellipses, suggestors boxes filled by kind, models cylinders, packs
folders; an unreachable key, a suggestor that never fires and an unused model
or pack are dashed and red. `informs`, `calls`, `summarizes` and `provides`
edges are dotted, with their name. The
invariants are one note node, a line each.
"""

from __future__ import annotations

from ._model import Node, PipelineGraph
from ._text import header, invariant_line, subtitle

_SHAPE = {"key": "ellipse", "suggestor": "box", "model": "cylinder", "pack": "folder"}
_KIND_SHAPE = {"box": "box", "hexagon": "hexagon"}


def quote(text: str) -> str:
    """A DOT quoted string (its label escapes `\\n` stay literal text)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attributes(graph: PipelineGraph, node: Node) -> str:
    shape = _SHAPE[node.kind]
    kind = graph.style_of(node)
    if kind is not None:  # a suggestor: its kind's own style
        fill, color, shape = kind.fill, kind.stroke, _KIND_SHAPE.get(kind.shape, "box")
    else:
        fill, color = {
            "key": ("#ffffff", "#64748b"),
            "model": ("#f1f5f9", "#475569"),
            "pack": ("#fef9c3", "#ca8a04"),
        }.get(node.kind, ("#f1f5f9", "#475569"))  # (a hand-built graph's unstyled suggestor)
    style = "filled,rounded" if node.kind == "suggestor" else "filled"
    if not node.reachable:
        style, color = style + ",dashed", "#dc2626"
    label = f"{node.name}\n{subtitle(node)}"
    pairs = {
        "label": quote(label),
        "shape": shape,
        "style": quote(style),
        "fillcolor": quote(fill),
        "color": quote(color),
    }
    return ", ".join(f"{k}={v}" for k, v in pairs.items())


def render(graph: PipelineGraph) -> str:
    """The DOT text of `graph`, ending with a newline."""
    lines = [
        header(graph, "dot"),
        f"digraph {quote(graph.name)} {{",
        "  rankdir=LR;",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9, color="#64748b"];',
    ]
    lines += [f"  {quote(node.id)} [{_attributes(graph, node)}];" for node in graph.nodes]
    for edge in graph.edges:
        attributes = []
        if edge.relation in ("informs", "calls", "summarizes", "provides"):
            attributes += ["style=dotted", f"label={quote(edge.relation)}"]
        if not edge.reachable:
            attributes.append('color="#dc2626"')
        listed = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"  {quote(edge.source)} -> {quote(edge.target)}{listed};")
    if graph.invariants:
        text = "invariants\\l" + "".join(
            quote(invariant_line(i))[1:-1] + "\\l" for i in graph.invariants
        )
        lines.append(
            f'  "invariants" [shape=note, style=filled, fillcolor="#fff7ed", '
            f'color="#c2410c", label="{text}"];'
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
