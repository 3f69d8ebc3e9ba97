"""The graph as a JSON document (`graph --format json`), for tools.

    {"graph": "converge-dsl/graph/v1", "pipeline", "file", "description",
     "nodes": [{"id", "kind", "name", "style", "reachable", "details": {label: text},
                "schema": JSON Schema or null, "source": {file, line, column, end_line} or null,
                "parts": {label: [item, ...]}}],
     "edges": [{"from", "to", "relation", "reachable"}],
     "invariants": [{"name", "class", "critical", "check", "message", "source", "keys"}],
     "unreachable_keys": [...], "never_firing_suggestors": [...]}

The first line holds the format's name, so an output file is recognised as
ours (`_text.MARKERS`). Keys keep this order; two renderings of one pipeline
are byte-identical.
"""

from __future__ import annotations

import json
from typing import Any

from ._model import PipelineGraph, source_value


def document(graph: PipelineGraph) -> dict[str, Any]:
    """The JSON value of `graph` (see the module docstring)."""
    return {
        "graph": "converge-dsl/graph/v1",
        "pipeline": graph.name,
        "file": graph.file,
        "description": graph.description,
        "nodes": [
            {
                "id": node.id,
                "kind": node.kind,
                "name": node.name,
                "style": node.style,
                "reachable": node.reachable,
                "details": dict(node.details),
                "schema": None if node.schema is None else json.loads(node.schema),
                "source": source_value(node.source, "end_line"),
                "parts": {label: list(items) for label, items in node.parts},
            }
            for node in graph.nodes
        ],
        "edges": [
            {"from": e.source, "to": e.target, "relation": e.relation, "reachable": e.reachable}
            for e in graph.edges
        ],
        "invariants": [
            {
                "name": i.name,
                "class": i.klass,
                "critical": i.critical,
                "check": i.check,
                "message": i.message,
                "source": source_value(i.source, "end_line"),
                "keys": list(i.keys),
            }
            for i in graph.invariants
        ],
        "unreachable_keys": list(graph.unreachable_keys),
        "never_firing_suggestors": list(graph.never_firing),
    }


def render(graph: PipelineGraph) -> str:
    """Indented JSON whose first line is `{"graph": "converge-dsl/graph/v1",`."""
    text = json.dumps(document(graph), indent=2, ensure_ascii=False)
    # `{` and the first key on one line: the marker `-o` recognises.
    return "{" + text.removeprefix("{\n  ") + "\n"
