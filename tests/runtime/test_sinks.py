"""`CompiledMemo`: what a sink keeps per compiled pipeline, found by identity."""

from __future__ import annotations

from converge_dsl.runtime import CompiledMemo

SOURCES = {"p.yaml": "name: p\n"}


def test_the_same_mappings_and_equal_sources_find_the_value() -> None:
    memo: CompiledMemo[str] = CompiledMemo(4)
    spans, kinds = {"a": 1}, {"a": "rule"}
    assert memo.find(spans, kinds, SOURCES) is None
    memo.keep(spans, kinds, SOURCES, "layout")
    assert memo.find(spans, kinds, dict(SOURCES)) == "layout"


def test_equal_mappings_of_another_pipeline_are_not_found() -> None:
    memo: CompiledMemo[str] = CompiledMemo(4)
    spans, kinds = {"a": 1}, {"a": "rule"}
    memo.keep(spans, kinds, SOURCES, "layout")
    assert memo.find(dict(spans), kinds, SOURCES) is None
    assert memo.find(spans, dict(kinds), SOURCES) is None


def test_other_sources_are_not_found() -> None:
    memo: CompiledMemo[str] = CompiledMemo(4)
    spans, kinds = {"a": 1}, {"a": "rule"}
    memo.keep(spans, kinds, SOURCES, "layout")
    assert memo.find(spans, kinds, {"p.yaml": "name: q\n"}) is None


def test_a_full_memo_forgets_every_pipeline() -> None:
    memo: CompiledMemo[int] = CompiledMemo(2)
    pipelines = [({"a": n}, {"a": "rule"}) for n in range(3)]
    for number, (spans, kinds) in enumerate(pipelines):
        memo.keep(spans, kinds, SOURCES, number)
    assert [memo.find(spans, kinds, SOURCES) for spans, kinds in pipelines] == [None, None, 2]
