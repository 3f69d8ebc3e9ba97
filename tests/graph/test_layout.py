"""The HTML page's layout (`converge_dsl.graph._layout`): no overlaps, left to right, stable."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from converge_dsl.graph import PipelineGraph, graph_pipeline
from converge_dsl.graph._layout import Box, _pava, layout

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p
    for p in (ROOT / "pipelines").glob("*.yaml")
    if not p.name.endswith((".script.yaml", ".test.yaml"))
)


def _graph(path: Path) -> PipelineGraph:
    return graph_pipeline(path, inputs={})


def _overlap(a: Box, b: Box) -> bool:
    return (
        a.x < b.x + b.width
        and b.x < a.x + a.width
        and a.y < b.y + b.height
        and b.y < a.y + a.height
    )


@pytest.mark.parametrize(
    "path", [*EXAMPLES, ROOT / "tests/graph/data/dead-ends.yaml"], ids=lambda p: p.stem
)
def test_no_two_nodes_overlap_and_all_fit(path: Path) -> None:
    graph = _graph(path)
    shape = layout(graph)
    assert set(shape.boxes) == {node.id for node in graph.nodes}
    for (a, box_a), (b, box_b) in itertools.combinations(shape.boxes.items(), 2):
        assert not _overlap(box_a, box_b), (a, b)
    for box in shape.boxes.values():
        assert box.x >= 0
        assert box.y >= 0
        assert box.x + box.width <= shape.width
        assert box.y + box.height <= shape.height


def test_flow_goes_left_to_right_with_bands_above_and_below() -> None:
    graph = _graph(ROOT / "pipelines/support-triage.yaml")
    boxes = layout(graph).boxes
    for edge in graph.edges:
        if edge.relation in ("reads", "writes"):
            assert boxes[edge.source].x + boxes[edge.source].width < boxes[edge.target].x
    flow_top = min(boxes[n.id].y for n in graph.nodes if n.kind in ("key", "suggestor"))
    flow_bottom = max(
        boxes[n.id].y + boxes[n.id].height for n in graph.nodes if n.kind in ("key", "suggestor")
    )
    assert boxes["pack:optimization"].y + boxes["pack:optimization"].height < flow_top
    assert boxes["model:default"].y > flow_bottom


def test_a_cycle_is_laid_out_with_its_back_edge_reversed() -> None:
    graph = _graph(ROOT / "tests/graph/data/dead-ends.yaml")
    shape = layout(graph)
    assert shape.reversed_edges == {("suggestor:echo", "key:evaluations")}


def test_layout_is_deterministic() -> None:
    graph = _graph(ROOT / "pipelines/market-entry.yaml")
    assert layout(graph) == layout(graph)


def test_pava_keeps_order_and_gaps_closest_to_the_wish() -> None:
    assert _pava([0.0, 0.0, 0.0], [0.0, 10.0, 10.0]) == [-10.0, 0.0, 10.0]
    assert _pava([0.0, 100.0], [0.0, 10.0]) == [0.0, 100.0]
