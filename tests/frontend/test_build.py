"""The event-stream builder: alias replay, the alias budget, depth, and the compact source map."""

from __future__ import annotations

import tracemalloc

import pytest

from converge_dsl.diagnostics import Diagnostic
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import _anchors, load_text


def _problems(text: str) -> list[Diagnostic]:
    with pytest.raises(PipelineInvalid) as caught:
        load_text(text, "f.yaml")
    return list(caught.value.diagnostics)


def test_an_alias_replays_its_anchor_at_its_own_path() -> None:
    doc = load_text("base: &b {k: [1, 2.50]}\nuse:\n  - *b\n  - other: *b\n", "f.yaml")
    assert doc.data["use"] == [{"k": [1, 2.5]}, {"other": {"k": [1, 2.5]}}]
    assert doc.data["use"][0] is not doc.data["base"]  # each alias builds its own objects
    smap = doc.source_map
    anchor = smap.get(("base", "k", 1))
    assert anchor is not None
    assert smap.get(("use", 1, "other", "k", 1)) == anchor  # located at the anchor
    assert smap.key_span(("use", 1, "other")).line == 4  # the alias's own key
    assert smap.get(("use", 0)).key_span is None  # type: ignore[union-attr]
    # the inexact float is listed under every path it is read at
    assert [path for path, _ in doc.inexact] == [
        ("base", "k", 1),
        ("use", 0, "k", 1),
        ("use", 1, "other", "k", 1),
    ]
    assert len(smap) == 15  # every path, aliases expanded (as PyYAML's re-walk counted)


def test_problems_under_an_anchor_are_reported_at_each_alias() -> None:
    found = _problems("a: &x {b: yes, b: 1}\nc: *x\n")
    assert [(d.code, d.path, d.line) for d in found] == [
        ("CD007", ("a", "b"), 1),
        ("CD002", ("a",), 1),
        ("CD007", ("c", "b"), 1),
        ("CD002", ("c",), 1),
    ]
    assert found[3].message == "duplicate key 'b' in c"


def test_a_scalar_anchor_used_as_a_key_and_a_value() -> None:
    doc = load_text("a: &s name\n*s : 1\nb: *s\n", "f.yaml")
    assert doc.data == {"a": "name", "name": 1, "b": "name"}
    assert doc.source_map.key_span(("name",)).column == 4  # the key is the anchored scalar


def test_a_recursive_alias_is_located_at_its_anchor() -> None:
    (problem,) = _problems("a: &x\n  - 1\n  - *x\nb: 2\n")
    assert (problem.code, problem.path) == ("CD009", ("a", 1))
    assert (problem.line, problem.column, problem.end_line) == (1, 4, 4)


def test_the_alias_budget_counts_what_a_rewalk_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "a: &a [[1], [2]]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    # a: 5 nodes (cost 5 + 2 + 2 = 9); b: 11 nodes (cost 11 + 9 + 9 = 29)
    assert load_text(text, "f.yaml").data["c"][1][1] == [[1], [2]]
    monkeypatch.setattr(_anchors, "MAX_ALIAS_NODES", 9 + 9 + 29 + 29)
    assert load_text(text, "f.yaml").data["c"][0][0][1] == [2]
    monkeypatch.setattr(_anchors, "MAX_ALIAS_NODES", 9 + 9 + 29 + 28)
    (problem,) = _problems(text)
    # the last re-walked collection crosses the budget: c[1] -> b -> its second *a -> a[1]
    assert (problem.code, problem.path, problem.line, problem.column) == (
        "CD009",
        ("c", 1, 1, 1),
        1,
        13,
    )


def test_an_alias_bomb_is_stopped_at_the_budget() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"l{i}: &l{i} [{', '.join(['*a' if i == 0 else f'*l{i - 1}'] * 10)}]" for i in range(8)
    ]
    problems = _problems("\n".join(lines) + "\n")
    assert [d.code for d in problems] == ["CD009"]


def test_depth_is_checked_where_an_alias_is_replayed() -> None:
    nested = "[" * 40 + "1" + "]" * 40
    deep_path = "{k: " * 30 + "*d" + "}" * 30
    problems = _problems(f"a: &d {nested}\nb: {deep_path}\n")
    assert [d.code for d in problems] == ["CD010"]
    assert len(problems[0].path) == 64
    assert problems[0].path[:31] == ("b", *("k",) * 30)


def test_too_deep_collections_are_skipped_not_built() -> None:
    text = "a: " + "[" * 900 + "]" * 900 + "\n"  # deeper than Python's recursion limit
    (problem,) = _problems(text)
    assert (problem.code, len(problem.path)) == ("CD010", 64)


def test_an_undefined_alias_and_a_duplicate_anchor_are_syntax_errors() -> None:
    (undefined,) = _problems("a: [1, *nope]\n")
    assert (undefined.code, undefined.line, undefined.column) == ("CD001", 1, 8)
    (duplicate,) = _problems("a: &x 1\nb: &x 2\n")
    assert (duplicate.code, duplicate.line) == ("CD001", 2)


def test_locations_in_a_deep_document() -> None:
    text = "".join("  " * depth + f"k{depth}:\n" for depth in range(60)) + "  " * 60 + "v: 1\n"
    doc = load_text(text, "f.yaml")
    path = (*(f"k{depth}" for depth in range(60)), "v")
    location = doc.source_map.get(path)
    assert location is not None
    assert (location.span.line, location.span.column) == (61, 124)
    assert location.key_span is not None
    assert (location.key_span.line, location.key_span.column) == (61, 121)
    assert doc.source_map.locate((*path[:30], "missing", 3)).key_span.line == 30  # type: ignore[union-attr]


def test_locations_in_a_wide_document() -> None:
    count = 5000
    text = "m:\n" + "".join(f"  key{i}: {i}\n" for i in range(count))
    text += "s:\n" + "".join(f"  - 'v{i}'\n" for i in range(count))
    doc = load_text(text, "f.yaml")
    smap = doc.source_map
    for i in (0, 1, count // 2, count - 1):
        value = smap.get(("m", f"key{i}"))
        assert value is not None
        assert (value.span.line, value.key_span.line) == (i + 2, i + 2)  # type: ignore[union-attr]
        item = smap.get(("s", i))
        assert item is not None
        assert (item.span.line, item.style) == (count + 3 + i, "'")
    assert smap.get(("m", "key5000")) is None
    assert smap.get(("s", count)) is None
    assert smap.get(("s", -1)) is None
    assert smap.get(("m", 0)) is None


def test_loading_many_seeds_keeps_memory_small() -> None:
    """A regression guard on the traced peak and retained memory of loading 2 x 10^4 seeds
    (tracing makes loading ten times slower; the memory grows linearly with the seeds)."""
    count = 20_000
    text = "seeds:\n" + "".join(f"  - {{id: f{i}, key: items, content: x}}\n" for i in range(count))
    tracemalloc.start()
    try:
        doc = load_text(text, "f.yaml")
        retained, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(doc.data["seeds"]) == count
    assert doc.source_map.get(("seeds", count - 1, "content")) is not None
    # measured: peak 11.6 MB, retained 8.8 MB (for 10^5 seeds 62 and 45);
    # with the node graph, for 10^5 seeds: 390 and 167
    assert peak < 18 * 2**20, peak
    assert retained < 13 * 2**20, retained


@pytest.mark.parametrize(
    ("text", "second_pass"),
    [
        ("a: !!int 000123\nb: 000123\n", True),  # a written tag whose text is seen untagged later
        ("b: 000123\na: !!int 000123\n", False),  # seen before: known on the first pass
        ("a: !!int 12\n", True),
        ("a: !!str 12\nb: '12'\n", False),
    ],
)
def test_a_tag_whose_meaning_depends_on_later_texts_asks_for_a_second_pass(
    text: str, second_pass: bool
) -> None:
    from yaml._yaml import CParser

    from converge_dsl.frontend._build import Builder

    parser = CParser(text)
    builder = Builder(parser, "f.yaml")
    for _ in range(2):  # the stream's and the document's start
        parser.get_event()
    builder.build(parser.get_event())
    parser.dispose()
    assert builder.needs_all_texts is second_pass


def test_a_duplicate_key_names_the_line_of_the_first() -> None:
    (problem,) = _problems("x: 1\nz:\n  a: 1\n  b: 2\n  a: 3\n")
    assert problem.code == "CD002"
    assert problem.hint == "the first 'a' is on line 3; keep one"
