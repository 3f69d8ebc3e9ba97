"""What the text renderers share: short node ids, first-line markers, labels.

A node's label on the HTML page names it in at most `LABEL_CHARS` characters
of its shown form (`label_name`: the name as `page_name` shows it, a longer one
cut, with "…", never inside a `⟨U+XXXX⟩` nor a grapheme cluster: `shown_cut`);
its title, its details and the search keep the whole name, so that one long name
does not widen its layer and shrink the whole drawing to fit.

Every output starts with a line naming converge-dsl's graph format
(`MARKERS`), so `-o FILE` recognises a file it wrote before and refuses to
overwrite anything else (`converge_dsl._files.open_output`).
"""

from __future__ import annotations

from converge_dsl._page_assets import page_name, shown_cut

from ._model import GraphInvariant, Node, PipelineGraph

# The first line of each format starts with one of these.
MARKERS: dict[str, str] = {
    "mermaid": "%% converge-dsl graph",
    "dot": "// converge-dsl graph",
    "json": '{"graph": "converge-dsl/graph/v1"',
    "html": "<!DOCTYPE html><!-- converge-dsl graph",
}
_PREFIX = {"key": "k", "suggestor": "s", "model": "m", "pack": "p"}
LABEL_CHARS = 48


def label_name(node: Node) -> str:
    """The name on the node's label, as the page shows it: the whole shown name, or its
    start and "\u2026" (see the module)."""
    shown = page_name(node.name)
    if len(shown) <= LABEL_CHARS:
        return shown
    return shown[: shown_cut(shown, LABEL_CHARS - 1)] + "\u2026"


def recognise(first_line: bytes) -> bool:
    """True for the first line of any graph converge-dsl wrote, whatever its format."""
    return any(first_line.startswith(marker.encode()) for marker in MARKERS.values())


def short_ids(graph: PipelineGraph) -> dict[str, str]:
    """Node id -> `k0`, `s1`, `m0`, `p0`...: ids every graph language accepts."""
    counts: dict[str, int] = {}
    ids: dict[str, str] = {}
    for node in graph.nodes:
        number = counts.get(node.kind, 0)
        counts[node.kind] = number + 1
        ids[node.id] = f"{_PREFIX[node.kind]}{number}"
    return ids


def subtitle(node: Node) -> str:
    """The second line of a node's label: what it is."""
    if node.kind == "suggestor":
        use = dict(node.details).get("uses")
        text = f"{node.style} {use.partition('/')[2] or use}" if use else node.style
    elif node.kind == "key":
        text = "key" if node.schema is None else "key, schema"
    elif node.kind == "model":
        text = f"model, {node.style}"
    else:
        text = f"pack {dict(node.details).get('version', '')}".strip()
    if not node.reachable:
        text += ", never fires" if node.kind == "suggestor" else ", unreachable"
        if node.kind in ("model", "pack"):
            text = text.replace("unreachable", "unused")
    return text


def invariant_line(invariant: GraphInvariant) -> str:
    critical = "" if invariant.critical else ", not critical"
    return f"{invariant.name} ({invariant.klass}{critical}): {invariant.check}"


def header(graph: PipelineGraph, format: str) -> str:
    return f"{MARKERS[format]}: {graph.name} ({graph.file})"
