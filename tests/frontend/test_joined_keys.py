"""Key names joined from string literals (`_joined_keys`): read as the key they make, and
within hard bounds whatever the template holds.

Before, `count('no' ~ 'tes')` and `facts['pri' ~ 'cing']` were keys named at run time
(CD251): no unknown key, no missing dependency was found through them.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest

from converge_dsl.frontend import _joined_keys
from converge_dsl.frontend import _mininodes as n
from converge_dsl.frontend._dataflow import reads, stop_guards


@pytest.mark.parametrize(
    ("text", "expression", "found"),
    [
        ("count('no' ~ 'tes') > 0", True, [("notes", "count", "(")]),
        ("count('pri' + ('ci' ~ 'ng'))", True, [("pricing", "count", "(")]),
        ("has((('n') ~ 'o') + 'tes')", True, [("notes", "has", "(")]),
        ("facts.get('no' ~ 'tes')", True, [("notes", "facts", "get")]),
        ("fact('no' ~ 'tes', 'x')", True, [("notes", "fact", "(")]),
        ("{{ facts['pri' ~ 'cing'] | length }}", False, [("pricing", "facts", "[")]),
        # through Jinja's own parse (a statement is outside the fast path)
        ("{% if x %}{{ data_of('no' ~ ('t' + 'es')) }}{% endif %}", False,
         [("notes", "data_of", "(")]),
        # only string literals join: anything else is named at run time, as before
        ("count('no' ~ inputs.suffix)", True, [(None, "count", "(")]),
        ("count('no' ~ 1)", True, [(None, "count", "(")]),
        ("count('ab' * 2)", True, [(None, "count", "(")]),
        ("count(('no' ~ 'tes') | lower)", True, [(None, "count", "(")]),
        ("count('no' - 'tes')", True, [(None, "count", "(")]),
    ],
)  # fmt: skip
def test_literals_joined_by_tilde_or_plus_name_the_key(
    text: str, expression: bool, found: list[tuple[Any, str, str]]
) -> None:
    assert [tuple(read) for read in reads(text, expression)] == found


def test_a_joined_key_read_only_as_a_stop_is_a_stop() -> None:
    assert stop_guards("count('no' ~ 'tes') == 0 and not has('ri' + 'sks')") == {"notes", "risks"}


def test_a_joined_key_beyond_the_bounds_is_named_at_run_time() -> None:
    longest = "a" * (_joined_keys.MAX_LENGTH - 1)
    assert reads(f"count('{longest}' ~ 'b')", True)[0].key == longest + "b"
    assert reads(f"count('{longest}' ~ 'bc')", True)[0].key is None
    most = " ~ ".join(["'a'"] * _joined_keys.MAX_PARTS)
    assert reads(f"count({most})", True)[0].key == "a" * _joined_keys.MAX_PARTS
    assert reads(f"count({most} ~ 'a')", True)[0].key is None


def test_the_text_of_a_joined_key_is_read_within_the_bounds_the_tree_is() -> None:
    """Before, `argument` read up to `MAX_NODES` pieces, so it made a key of more literals
    than `parts` joins, one no finding names: the text and the tree now agree."""
    most = " ~ ".join(["'a'"] * _joined_keys.MAX_PARTS)
    assert _joined_keys.argument(f"[{most}]", 1) == (
        "a" * _joined_keys.MAX_PARTS,
        (1, len(most) + 1, 4),
    )
    assert _joined_keys.argument(f"[{most} ~ 'a']", 1) is None


def _bounded(build: Any) -> None:
    """`build()` (a tree) is read in bounded time and memory: CPU time, not the wall
    clock, so a loaded machine does not fail it (the bounded read takes microseconds)."""
    tree = build()
    tracemalloc.start()
    started = time.process_time()
    try:
        found = _joined_keys.parts(tree)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found is None
    assert time.process_time() - started < 0.5
    assert peak < 50_000


def _deep_add(depth: int) -> n.Node:
    tree: n.Node = n.Const("a")
    for _ in range(depth):
        tree = n.Add(tree, n.Const("b"))
    return tree


def _deep_right(depth: int) -> n.Node:
    tree: n.Node = n.Const("a")
    for _ in range(depth):
        tree = n.Concat([n.Const("b"), tree])
    return tree


@pytest.mark.parametrize(
    "build",
    [
        lambda: _deep_add(200_000),  # 'a' + 'b' + ... (Jinja nests it to the left)
        lambda: _deep_right(200_000),  # 'b' ~ ('b' ~ (... 'a'))
        lambda: n.Concat([n.Const("ab")] * 1_000_000),  # many parts
        lambda: n.Concat([n.Concat([n.Const("a")] * 30)] * 30),  # many parts, nested
    ],
    ids=["deep-left", "deep-right", "many", "nested-many"],
)
def test_no_tree_makes_the_joining_slow_or_large(build: Any) -> None:
    _bounded(build)


def test_a_huge_literal_is_not_copied() -> None:
    huge = "a" * 50_000_000
    tree = n.Concat([n.Const(huge), n.Const("b")])
    found = _joined_keys.parts(tree)
    assert found is not None
    tracemalloc.start()
    try:
        assert _joined_keys.join(found, ()) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10_000


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("count(" + " ~ ".join(["'ab'"] * 5_000) + ")", None),
        ("count(" + " + ".join(["'ab'"] * 300) + ")", None),  # Jinja's parse: deep to the left
        ("count(" + "(" * 20 + "'a'" + " ~ 'b')" * 20 + ")", "a" + "b" * 20),
        ("count(" + "(" * 40 + "'a'" + " ~ 'b')" * 40 + ")", None),
        ("count('" + "a" * 1_000_000 + "' ~ 'b')", None),
    ],
    ids=["many", "many-plus", "deep", "deeper", "huge"],
)
def test_hostile_joins_are_read_quickly(text: str, key: str | None) -> None:
    started = time.process_time()  # CPU time: a loaded machine does not fail it
    assert reads(text, True)[0].key == key
    assert time.process_time() - started < 5


def test_the_span_of_a_joined_key_stops_at_its_argument() -> None:
    text = "count(('no' ~ 'tes')) ~ 'x'"
    assert _joined_keys.span(text, len("count("), "notes") == (7, 19, 11)  # and 'no' ends
    assert _joined_keys.span("['a' ~\n 'bx']", 1, "abx") == (1, 12, 4)  # whatever lines
    assert _joined_keys.span("['abx']", 1, "abx") == (2, 5, 5)
    assert _joined_keys.span(text, len("count("), "notesx") is None
    assert _joined_keys.span("count(" + "(" * 10_000, 6, "a") is None


def test_an_argument_is_its_literals_and_the_end_of_the_first() -> None:
    """The first literal marks joined ones that cross a line of the file (a `|` block's
    line break, or a folded scalar's space), which only the document can tell."""
    assert _joined_keys.argument("['a' ~\n 'bx']", 1) == ("abx", (1, 12, 4))
    assert _joined_keys.argument("['a' ~ 'bx']", 1) == ("abx", (1, 11, 4))
    assert _joined_keys.argument("['abx']", 1) == ("abx", (2, 5, 5))
