"""The graph drawn as SVG from its layout (`_layout`), for the HTML page.

Each node is a `<g class="node ..." data-id="...">` that the page's script
makes clickable and focusable; edges are drawn first, under the nodes, each a
`<path class="edge ..." data-from data-to>`. Flow edges leave a node's right
side and enter the next one's left side through their dummy points; edges
reversed to break a cycle are arcs under the nodes; `calls`, `summarizes` and
`provides` join the side bands (`informs` is a flow edge, dashed). A
suggestor's parts (an agent's tools and contributors) are small marks along
its bottom edge. Colours live in the page's stylesheet (classes), so the
SVG carries only geometry and text. Names and ids (a node's, an edge's ends,
a part's items) are written as `page_name` shows them (`⟨U+202E⟩`), the rest
of the text as `page_text` does. Each label reads in its own direction: a
`<text>` whose first strong letter is right to left is laid right to left
(`direction="rtl"`), so that an Arabic name's digits and Latin suffix stay
where they read (laid left to right, "محمد 42 copy" showed as "42 محمد copy"),
and a name holding a right-to-left letter is isolated (U+2068 ... U+2069) in
a title, so that it does not turn the ": rule" after it around.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Iterator, Sequence

from converge_dsl._page_assets import html_name, html_text, page_name, page_text

from ._layout import Box, Layout, layout
from ._model import Edge, Node, PipelineGraph
from ._text import label_name, subtitle

_DEFS = """<defs>
<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" \
orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrow"/></marker>
<marker id="arrow-dead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" \
orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrow dead"/></marker>
<pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" \
patternTransform="rotate(45)"><rect width="8" height="8" class="hatch-bg"/>\
<line x1="0" y1="0" x2="0" y2="8" class="hatch-line"/></pattern>
</defs>"""


_RIGHT_TO_LEFT = ("R", "AL")


def _direction(text: str) -> str:
    """The attribute that lays a `<text>` reading `text` right to left when its first
    strong letter is (nothing for left to right, the drawing's own)."""
    for character in text:
        kind = unicodedata.bidirectional(character)
        if kind in _RIGHT_TO_LEFT:
            return ' direction="rtl"'
        if kind == "L":
            return ""
    return ""


def _isolated(shown: str) -> str:
    """`shown`, a name in a title, between U+2068 and U+2069 when it holds a right-to-left
    letter, so that it reads in its own direction whatever follows it."""
    if any(unicodedata.bidirectional(c) in _RIGHT_TO_LEFT for c in shown):
        return f"\u2068{shown}\u2069"
    return shown


def _f(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _curve(points: Sequence[tuple[float, float]]) -> str:
    """A smooth left-to-right path through `points` (horizontal tangents at each)."""
    (x0, y0), rest = points[0], points[1:]
    parts = [f"M{_f(x0)},{_f(y0)}"]
    for x1, y1 in rest:
        half = (x1 - x0) / 2
        parts.append(f"C{_f(x0 + half)},{_f(y0)} {_f(x1 - half)},{_f(y1)} {_f(x1)},{_f(y1)}")
        x0, y0 = x1, y1
    return " ".join(parts)


def _vertical(x0: float, y0: float, x1: float, y1: float) -> str:
    """A smooth top-to-bottom (or bottom-to-top) path."""
    half = (y1 - y0) / 2
    return (
        f"M{_f(x0)},{_f(y0)} C{_f(x0)},{_f(y0 + half)} {_f(x1)},{_f(y1 - half)} {_f(x1)},{_f(y1)}"
    )


def _arc(source: Box, target: Box, depth: float) -> str:
    """A back edge: out of the source's bottom, round under both, into the target's bottom."""
    low = max(source.y + source.height, target.y + target.height) + depth
    sx, sy = source.cx + 10, source.y + source.height
    tx, ty = target.cx - 10, target.y + target.height
    return f"M{_f(sx)},{_f(sy)} C{_f(sx)},{_f(low)} {_f(tx)},{_f(low)} {_f(tx)},{_f(ty)}"


class _Columns:
    """The flow's columns (left, right) by centre x, and which boxes stand in each."""

    def __init__(self, shape: Layout, flow: set[str]) -> None:
        members: dict[float, list[Box]] = {}
        for node, box in shape.boxes.items():
            if node in flow:
                members.setdefault(round(box.cx, 1), []).append(box)
        # centre -> (left, right, top of its highest box, bottom of its lowest box)
        self.columns = {
            centre: (
                min(b.x for b in boxes),
                max(b.x + b.width for b in boxes),
                min(b.y for b in boxes),
                max(b.y + b.height for b in boxes),
            )
            for centre, boxes in members.items()
        }

    def of(self, box: Box) -> tuple[float, float, float, float]:
        bottom = box.y + box.height
        return self.columns.get(round(box.cx, 1), (box.x, box.x + box.width, box.y, bottom))


def _to_model(source: Box, target: Box, columns: _Columns, shift: float = 0.0) -> str:
    """Down from a suggestor to a model of the band below; round its column when
    another node of the column stands below it. `shift` moves a second edge to the
    same model (a summarizer's) off the first."""
    _, right, _, lowest = columns.of(source)
    if lowest <= source.y + source.height:
        return _vertical(source.cx + shift, source.y + source.height, target.cx + shift, target.y)
    lane, start = right + 14 + shift, source.x + source.width - 14 - shift
    bottom, turn = source.y + source.height, target.y - 34
    return (
        f"M{_f(start)},{_f(bottom)} C{_f(start)},{_f(bottom + 12)} {_f(lane)},{_f(bottom + 2)} "
        f"{_f(lane)},{_f(bottom + 18)} L{_f(lane)},{_f(turn - 14)} "
        f"C{_f(lane)},{_f(turn + 6)} {_f(target.cx)},{_f(turn)} {_f(target.cx)},{_f(target.y)}"
    )


def _from_pack(source: Box, target: Box, columns: _Columns) -> str:
    """Down from a pack of the band above to a suggestor; round its column when
    another node of the column stands above it."""
    left, _, highest, _ = columns.of(target)
    if highest >= target.y:
        return _vertical(source.cx, source.y + source.height, target.cx, target.y)
    lane, end = left - 14, target.x + 14
    bottom, turn = source.y + source.height, source.y + source.height + 34
    return (
        f"M{_f(source.cx)},{_f(bottom)} C{_f(source.cx)},{_f(turn)} {_f(lane)},{_f(turn - 6)} "
        f"{_f(lane)},{_f(turn + 14)} L{_f(lane)},{_f(target.y - 18)} "
        f"C{_f(lane)},{_f(target.y - 2)} {_f(end)},{_f(target.y - 12)} {_f(end)},{_f(target.y)}"
    )


def _edge_path(edge: Edge, shape: Layout, columns: _Columns) -> str:
    source, target = shape.boxes[edge.source], shape.boxes[edge.target]
    if edge.relation == "calls":
        return _to_model(source, target, columns)
    if edge.relation == "summarizes":
        return _to_model(source, target, columns, 22.0)
    if edge.relation == "provides":
        return _from_pack(source, target, columns)
    if (edge.source, edge.target) in shape.reversed_edges:
        return _arc(source, target, 28.0)
    bends = shape.bends.get((edge.source, edge.target), ())
    start = (source.x + source.width, source.cy)
    return _curve([start, *bends, (target.x, target.cy)])


def _edges(graph: PipelineGraph, shape: Layout) -> Iterator[str]:
    columns = _Columns(shape, {n.id for n in graph.nodes if n.kind in ("key", "suggestor")})
    for edge in graph.edges:
        dead = "" if edge.reachable else " dead"
        marker = "arrow-dead" if dead else "arrow"
        yield (
            f'<path class="edge rel-{edge.relation}{dead}" data-from="{html_name(edge.source)}" '
            f'data-to="{html_name(edge.target)}" d="{_edge_path(edge, shape, columns)}" '
            f'marker-end="url(#{marker})"/>'
        )


def _shape(node: Node, box: Box) -> str:
    x, y, w, h = _f(box.x), _f(box.y), _f(box.width), _f(box.height)
    if node.kind == "key":
        return f'<rect class="shape" x="{x}" y="{y}" width="{w}" height="{h}" rx="22"/>'
    if node.kind == "model":
        e = 6.0
        top, bottom = box.y + e, box.y + box.height - e
        rx, right = _f(box.width / 2), _f(box.x + box.width)
        body = (
            f"M{x},{_f(top)} A{rx},{_f(e)} 0 0 0 {right},{_f(top)} V{_f(bottom)} "
            f"A{rx},{_f(e)} 0 0 1 {x},{_f(bottom)} Z"
        )
        lid = f"M{x},{_f(top)} A{rx},{_f(e)} 0 0 1 {right},{_f(top)}"
        return f'<path class="shape" d="{body}"/><path class="lid" d="{lid}"/>'
    if node.kind == "pack":
        d = 12.0
        points = [
            (box.x + d, box.y),
            (box.x + box.width - d, box.y),
            (box.x + box.width, box.cy),
            (box.x + box.width - d, box.y + box.height),
            (box.x + d, box.y + box.height),
            (box.x, box.cy),
        ]
        joined = " ".join(f"{_f(px)},{_f(py)}" for px, py in points)
        return f'<polygon class="shape" points="{joined}"/>'
    bar = f'<rect class="bar" x="{x}" y="{y}" width="6" height="{h}" rx="3"/>'
    return f'<rect class="shape" x="{x}" y="{y}" width="{w}" height="{h}" rx="8"/>{bar}'


def _badges(node: Node, box: Box) -> str:
    """Small marks at the top-right corner: a seeded key, a key with a schema."""
    marks = []
    details = dict(node.details)
    if node.kind == "key" and "seeded" in details:
        marks.append(("seeded", "seed"))
    if node.schema is not None:
        marks.append(("schema", "{ }"))
    out, right = [], box.x + box.width - 8
    for css, text in marks:
        width = 10 + 6.4 * len(text)
        left = right - width
        out.append(
            f'<g class="badge {css}"><rect x="{_f(left)}" y="{_f(box.y - 8)}" '
            f'width="{_f(width)}" height="15" rx="7"/><text x="{_f(left + width / 2)}" '
            f'y="{_f(box.y + 3)}">{html_text(text)}</text></g>'
        )
        right = left - 4
    return "".join(out)


def _parts(node: Node, box: Box) -> str:
    """A mark per labelled part along the bottom edge (`tools 3`), named in full in its title."""
    out, left = [], box.x + 12
    for label, items in node.parts:
        text = f"{label} {len(items)}"
        width = 10 + 6.0 * len(text)
        out.append(
            f'<g class="part"><title>{html_text(label)}: {_items(items)}</title>'
            f'<rect x="{_f(left)}" y="{_f(box.y + box.height - 7)}" width="{_f(width)}" '
            f'height="14" rx="7"/><text x="{_f(left + width / 2)}" '
            f'y="{_f(box.y + box.height + 3)}">{html_text(text)}</text></g>'
        )
        left += width + 4
    return "".join(out)


def _items(items: Sequence[str]) -> str:
    """A part's items, named in its title, each in its own direction."""
    return html.escape(", ".join(_isolated(page_name(item)) for item in items))


def _node(node: Node, box: Box) -> str:
    dead = "" if node.reachable else " dead"
    name, sub = label_name(node), subtitle(node)
    label = html.escape(f"{_isolated(page_name(node.name))}: {page_text(sub)}")
    return (
        f'<g class="node kind-{node.kind} style-{html_text(node.style)}{dead}" '
        f'data-id="{html_name(node.id)}" tabindex="0" role="button" '
        f'aria-label="{label}"><title>{label}</title>{_shape(node, box)}'
        f'<text class="name" x="{_f(box.cx)}" y="{_f(box.cy - 3)}"{_direction(name)}>'
        f"{html.escape(name)}</text>"
        f'<text class="sub" x="{_f(box.cx)}" y="{_f(box.cy + 13)}"{_direction(sub)}>'
        f"{html_text(sub)}</text>"
        f"{_badges(node, box)}{_parts(node, box)}</g>"
    )


def svg(graph: PipelineGraph) -> str:
    """The SVG element of `graph`; its `data-width`/`data-height` give the drawing's size."""
    shape = layout(graph)
    width, height = _f(shape.width), _f(shape.height)
    edges = "".join(_edges(graph, shape))
    nodes = "".join(_node(node, shape.boxes[node.id]) for node in graph.nodes)
    return (
        f'<svg id="graph" xmlns="http://www.w3.org/2000/svg" data-width="{width}" '
        f'data-height="{height}" role="img" aria-label="{html_text(graph.name)} pipeline graph">'
        f'{_DEFS}<g id="viewport"><g class="edges">{edges}</g>'
        f'<g class="nodes">{nodes}</g></g></svg>'
    )
