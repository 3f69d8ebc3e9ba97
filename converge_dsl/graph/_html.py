"""The graph as one self-contained HTML page (`graph --format html`).

The page holds everything it shows: the SVG drawn in Python (`_svg`), its
stylesheet and script (`page.css`, `page.js`, package data beside this
module, inlined), and the nodes' details and YAML source excerpts as a JSON
block. It loads nothing at view time: no CDN, no font, no network.

The script gives pan (drag), zoom (wheel, `+`/`-` buttons and keys, `0` to
fit), a search box that marks the nodes whose name holds the text (Enter shows
the first and centres it), and a click (or Enter on a focused node) shows the
node's details and its source: `file:line` and the lines themselves, a long
line wrapped under itself (and cut by `_long_lines.cut_line` around where the node
starts). An invariant lists the keys its check reads;
selecting it marks them, and a click on one selects that key. `#node=<id>` in
the address selects a node when the page opens (`#node=suggestor:classify`).

A name or an id (a node's, an invariant's, the keys it reads, those the
summary and a node's details list) is shown as `page_name` writes it (`⟨U+202E⟩` for a hidden
character), as the run report, batch, eval and diff pages show theirs; the
page's ids are those shown forms, and the script takes its `shownName` and
search terms from the shared `names.js`. `#node=` names the raw id (the page
writes the address with `rawName`, and reads it with `shownName`). Details,
descriptions, checks and source lines keep `page_text`'s escapes.
Its Content-Security-Policy (`_page_assets.CONTENT_SECURITY_POLICY`) allows its
inline style and script only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from converge_dsl._long_lines import cut_lines
from converge_dsl._page_assets import (
    CONTENT_SECURITY_POLICY,
    Names,
    html_name,
    html_text,
    page_asset,
    page_json,
    page_name,
)

from ._model import PipelineGraph, Source, source_value
from ._svg import svg
from ._text import MARKERS

_HERE = Path(__file__).resolve().parent
# The edges that are not plain reads and writes, named in the legend when the graph has one.
_LEGEND_EDGES = (
    ("informs", "read by a contributor (no dependency)"),
    ("calls", "calls a model"),
    ("summarizes", "summarizer's calls"),
    ("provides", "pack provides"),
)
_LEGEND_OTHERS = (
    ("kind-model", "model"),
    ("kind-pack", "pack"),
    ("kind-key dead", "unreachable / never fires"),
)


def _kind_css(graph: PipelineGraph) -> str:
    """One rule per suggestor kind, from its own `GraphStyle` (page.css has the rest).

    A dead suggestor keeps page.css's dead style (red, hatched): the kind's colours
    apply to the others only.
    """
    return "".join(
        f".kind-suggestor.style-{name}:not(.dead) .shape "
        f"{{ fill: {style.fill}; stroke: {style.stroke}; }} "
        f".kind-suggestor.style-{name} .bar {{ fill: {style.stroke}; }}\n"
        for name, style in graph.styles
    )


def _asset(name: str) -> str:
    return (_HERE / name).read_text(encoding="utf-8")


def _source(source: Source | None) -> dict[str, Any] | None:
    """`source` as the page's data: its lines, each long one cut (`cut_lines`)."""
    value = source_value(source, "lines")
    if source is not None and value is not None:
        value["lines"] = cut_lines(source.lines, source.column)
    return value


def _detail(label: str, value: str) -> list[str]:
    """A detail as the page shows it: a text that names things (`Names`, marked so by
    whoever wrote it) with each name as `page_name` shows it."""
    return [label, value.shown() if isinstance(value, Names) else value]


def _data(graph: PipelineGraph) -> dict[str, Any]:
    nodes = {
        page_name(node.id): {
            "name": page_name(node.name),
            "kind": node.kind,
            "style": node.style,
            "reachable": node.reachable,
            "details": [_detail(label, value) for label, value in node.details],
            "schema": node.schema,
            "source": _source(node.source),
        }
        for node in graph.nodes
    }
    invariants = {
        f"invariant:{index}": {
            "name": page_name(i.name),
            "kind": "invariant",
            "style": i.klass,
            "reachable": True,
            "details": [
                ["class", i.klass],
                ["critical", "yes" if i.critical else "no"],
                ["check", i.check],
                *([["message", i.message]] if i.message else []),
                ["reads", Names(i.keys, "no key by name").shown()],
            ],
            "keys": [page_name(key) for key in i.keys],
            "schema": None,
            "source": _source(i.source),
        }
        for index, i in enumerate(graph.invariants)
    }
    return {"nodes": {**nodes, **invariants}}


def _legend(graph: PipelineGraph) -> str:
    kinds = tuple((f"kind-suggestor style-{name}", style.label) for name, style in graph.styles)
    entries = (("kind-key", "context key"), *kinds, *_LEGEND_OTHERS)
    items = "".join(
        f'<li><svg width="26" height="16" aria-hidden="true"><g class="{css}">'
        f'<rect class="shape" x="1" y="1" width="24" height="14" rx="4"/></g></svg>'
        f"{html_text(text)}</li>"
        for css, text in entries
    )
    used = {edge.relation for edge in graph.edges}
    items += "".join(
        f'<li><svg width="26" height="16" aria-hidden="true"><path class="swatch rel-{rel}" '
        f'd="M1,8 L25,8"/></svg>{html_text(text)}</li>'
        for rel, text in _LEGEND_EDGES
        if rel in used
    )
    return f'<section id="legend"><h2>Legend</h2><ul>{items}</ul></section>'


def _key_links(keys: tuple[str, ...]) -> str:
    """The keys an invariant reads, each a mark that selects the key's node."""
    if not keys:
        return ""
    marks = "".join(f'<span class="key">{html_name(k)}</span>' for k in keys)
    return f'<span class="inv-keys">reads {marks}</span>'


def _invariants(graph: PipelineGraph) -> str:
    if not graph.invariants:
        return '<section id="invariants"><h2>Invariants</h2><p class="hint">none</p></section>'
    items = "".join(
        f'<li><button type="button" class="invariant" data-id="invariant:{index}">'
        f'<span class="inv-name">{html_name(i.name)}</span> <span class="inv-class">'
        f"{html_text(i.klass)}{'' if i.critical else ', not critical'}</span>"
        f"<code>{html_text(i.check)}</code>{_key_links(i.keys)}</button></li>"
        for index, i in enumerate(graph.invariants)
    )
    return f'<section id="invariants"><h2>Invariants</h2><ul>{items}</ul></section>'


def _summary(graph: PipelineGraph) -> str:
    counts = []
    for kind in ("suggestor", "key", "model", "pack"):
        number = len(graph.of_kind(kind))
        counts.append(f"{number} {kind}{'' if number == 1 else 's'}")
    warnings = []
    if graph.unreachable_keys:
        warnings.append(f"unreachable keys: {html_name(', '.join(graph.unreachable_keys))}")
    if graph.never_firing:
        warnings.append(f"never fire: {html_name(', '.join(graph.never_firing))}")
    shown = "".join(f'<span class="warning">{w}</span>' for w in warnings)
    counted = html_text(" · ".join(counts))
    return f'<p class="summary">{html_text(graph.file)} · {counted}{shown}</p>'


def render(graph: PipelineGraph) -> str:
    """The HTML page of `graph`; its first line is the marker `-o` recognises."""
    title = html_text(graph.name)
    # Safe inside <script>, control and bidi characters as visible escapes (`page_json`),
    # as in the SVG and headings (`html_text`).
    data = page_json(_data(graph))
    description = (
        f'<p class="description">{html_text(graph.description)}</p>' if graph.description else ""
    )
    return (
        f"{MARKERS['html']} -->\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
        f"<title>{title} · converge-dsl graph</title>"
        f"<style>{_asset('page.css')}{page_asset('marks.css')}{_kind_css(graph)}</style></head>\n"
        f"<body><header><h1>{title}</h1>{description}{_summary(graph)}</header>\n"
        f'<main><div id="canvas">{svg(graph)}'
        '<div class="search"><input id="search" type="search" placeholder="Find a node"'
        ' aria-label="find a node by name" autocomplete="off"><span id="search-count"></span></div>'
        '<div class="controls"><button type="button" id="zoom-in" title="zoom in (+)">+</button>'
        '<button type="button" id="zoom-out" title="zoom out (-)">&#8722;</button>'
        '<button type="button" id="fit" title="fit to the window (0)">fit</button></div></div>\n'
        '<aside id="panel"><section id="details"><h2>Details</h2>'
        '<p class="hint">Click a node to see its YAML source. Drag to pan, scroll to zoom.</p>'
        f"</section>{_invariants(graph)}{_legend(graph)}</aside></main>\n"
        f'<script type="application/json" id="graph-data">{data}</script>\n'
        f"<script>{page_asset('names.js')}{_asset('page.js')}</script>\n</body></html>\n"
    )
