"""Draw a pipeline: its compiled graph as Mermaid, DOT, JSON or a self-contained HTML page.

See docs/architecture.md §15.

Public surface:
- `graph_pipeline(path, *, inputs, roots=())` -> `PipelineGraph`: load, validate and
  compile the pipeline (never running it, never building a model), then build its graph
  with static reachability. Raises `PipelineInvalid` (the diagnostics of `validate`,
  exit 2) or `UsageError` (inputs).
- `graph_of(compiled)` -> `PipelineGraph`: the graph of an already compiled pipeline.
- `PipelineGraph`, `Node`, `Edge`, `GraphInvariant`, `Source`: the immutable graph model
  (nodes: suggestors, keys with their schemas, models, packs; edges: `reads`, `writes`,
  `calls`, `provides`; `reachable` marks on nodes and edges).
- `FORMATS` (`mermaid`, `dot`, `json`, `html`) and `render(graph, format)` -> text.
- `recognise(first_line)`: true for the first line of any graph file converge-dsl
  wrote (how `graph -o FILE` refuses to overwrite anything else).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from converge_dsl._json_types import JsonObject

from ._build import graph_of
from ._model import Edge, GraphInvariant, Node, PipelineGraph, Source
from ._text import recognise

FORMATS: tuple[str, ...] = ("mermaid", "dot", "json", "html")


def _renderer(format: str) -> Callable[[PipelineGraph], str]:
    if format == "mermaid":
        from ._mermaid import render as mermaid

        return mermaid
    if format == "dot":
        from ._dot import render as dot

        return dot
    if format == "json":
        from ._json import render as json_text

        return json_text
    if format == "html":
        from ._html import render as html

        return html
    raise ValueError(f"unknown graph format {format!r}; expected one of {', '.join(FORMATS)}")


def render(graph: PipelineGraph, format: str) -> str:
    """`graph` as text in `format` (one of `FORMATS`)."""
    return _renderer(format)(graph)


def graph_pipeline(
    path: Path,
    *,
    inputs: JsonObject,
    roots: Sequence[Path] = (),
    on_fetch: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> PipelineGraph:
    """The graph of the pipeline at `path` (see the module docstring); `env` is the
    environment its checks read (default: the process's)."""
    from ._compile import compile_for_graph

    return graph_of(compile_for_graph(path, inputs=inputs, roots=roots, on_fetch=on_fetch, env=env))


__all__ = [
    "FORMATS",
    "Edge",
    "GraphInvariant",
    "Node",
    "PipelineGraph",
    "Source",
    "graph_of",
    "graph_pipeline",
    "recognise",
    "render",
]
