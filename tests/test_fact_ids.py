"""Which texts can name a fact (`converge_dsl._fact_ids`), and their shown form."""

from __future__ import annotations

import pytest

from converge_dsl._fact_ids import id_problem, shown_id


@pytest.mark.parametrize(
    "text",
    ["t1", "nordics", "validation:rejected:x", "a/b", "v1.2", "a..b", "./a", "...", "é ü 中"],
)
def test_ids_allowed_as_before(text: str) -> None:
    assert id_problem(text) is None
    assert shown_id(text) == text


@pytest.mark.parametrize(
    ("text", "problem", "shown"),
    [
        ("a\x00b", "holds a NUL byte", "a\\x00b"),
        ("a\tb", "holds a control character (U+0009)", "a\\x09b"),
        ("a\x85b", "holds a control character (U+0085)", "a\\x85b"),
        ("a\u202eb", "holds a hidden character (U+202E)", "a\\u202eb"),
        ("a\u200bb", "holds a hidden character (U+200B)", "a\\u200bb"),
        ("a\ufeff", "holds a hidden character (U+FEFF)", "a\\ufeff"),
        ("..", "has '..' as a path segment (a folder up)", "%2E%2E"),
        ("a/../b", "has '..' as a path segment (a folder up)", "a/%2E%2E/b"),
        ("a\\..", "has '..' as a path segment (a folder up)", "a\\\\%2E%2E"),
        ("x\\x00", None, "x\\x00"),  # a backslash and text: visible
    ],
)
def test_refused_ids_say_why_and_show_escaped(text: str, problem: str | None, shown: str) -> None:
    assert id_problem(text) == problem
    assert shown_id(text) == shown
    assert id_problem(shown) is None
