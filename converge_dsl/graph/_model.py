"""The typed graph of a compiled pipeline: nodes, edges, invariants (immutable).

Nodes are the pipeline's suggestors, the context keys they read, write or seed
(and every key the pipeline declares), the models they call and the packs they
come from (with the version the lock pins, when there is a lock). Edges are
`reads` (key -> suggestor, a dependency), `writes` (suggestor -> key, a
target), `informs` (key -> suggestor: read without being a dependency, as an
agent's contributors read their keys), `calls` (suggestor -> model),
`summarizes` (suggestor -> model: an agent's summarizer) and `provides` (pack
-> suggestor). A suggestor node carries its kind's `parts` (an agent's tools
and contributors); an invariant, the keys its check reads. `reachable` says
what static reachability found (`_reach`): a key that can ever hold a fact, a
suggestor that can ever become a candidate, a model or pack used by such a
suggestor.

Renderers (`_mermaid`, `_dot`, `_json`, `_html`) read only this model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from converge_dsl.frontend import GraphStyle

NodeKind = Literal["suggestor", "key", "model", "pack"]
Relation = Literal["reads", "writes", "informs", "calls", "summarizes", "provides"]
NODE_KINDS: tuple[NodeKind, ...] = ("key", "suggestor", "model", "pack")


@dataclass(frozen=True, slots=True)
class Source:
    """Where a node is written: `file:line:column`, and the YAML lines from `line` on."""

    file: str
    line: int
    column: int
    end_line: int
    lines: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def source_value(
    source: Source | None, last: Literal["end_line", "lines"]
) -> dict[str, Any] | None:
    """`source` as a JSON value: file, line, column and then `last` (`end_line` in the
    JSON document for tools, `lines` in the HTML page's data); None for no source."""
    if source is None:
        return None
    return {
        "file": source.file,
        "line": source.line,
        "column": source.column,
        last: source.end_line if last == "end_line" else source.lines,
    }


@dataclass(frozen=True, slots=True)
class Node:
    """One node. `id` is `"<kind>:<name>"`, unique in a graph.

    `style` refines the kind: a suggestor's kind (`seed`, `rule`, `llm`,
    `agent`, `pack`), a key's origin (`builtin` or `declared`), a model's
    adapter, `pack` for a pack. `details` are ordered (label, text) pairs for
    people; `schema` is a key's JSON Schema as JSON text, when it declares one.
    """

    id: str
    kind: NodeKind
    name: str
    style: str
    reachable: bool
    details: tuple[tuple[str, str], ...] = ()
    schema: str | None = None
    source: Source | None = None
    # Labelled parts drawn on a suggestor's node (an agent's tools, contributors).
    parts: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Edge:
    """A directed edge between two node ids; `reachable` when its source is."""

    source: str
    target: str
    relation: Relation
    reachable: bool


@dataclass(frozen=True, slots=True)
class GraphInvariant:
    """An invariant of the pipeline, listed beside the graph (`klass`: structural,
    semantic or acceptance)."""

    name: str
    klass: str
    critical: bool
    check: str
    message: str | None
    source: Source | None
    keys: tuple[str, ...] = ()  # the keys its check reads (`_build.keys_read`)


@dataclass(frozen=True, slots=True)
class PipelineGraph:
    """The graph of one pipeline: nodes in a stable order (keys, suggestors, models,
    packs; each in document order), edges in suggestor order, invariants in order."""

    name: str
    file: str
    description: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    invariants: tuple[GraphInvariant, ...]
    # Suggestor kind -> how it is drawn (each kind's own `GraphStyle`), registry order.
    styles: tuple[tuple[str, GraphStyle], ...] = ()

    def style_of(self, node: Node) -> GraphStyle | None:
        """The drawing style of a suggestor node's kind (None for other nodes)."""
        return dict(self.styles).get(node.style) if node.kind == "suggestor" else None

    def of_kind(self, kind: NodeKind) -> tuple[Node, ...]:
        return tuple(node for node in self.nodes if node.kind == kind)

    @property
    def unreachable_keys(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.of_kind("key") if not n.reachable)

    @property
    def never_firing(self) -> tuple[str, ...]:
        """Suggestors that can never become a candidate."""
        return tuple(n.name for n in self.of_kind("suggestor") if not n.reachable)
