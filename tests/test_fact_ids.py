"""Which texts can name a fact (`converge_dsl._fact_ids`), and their shown form."""

from __future__ import annotations

import pytest

from converge_dsl._fact_ids import id_problem, shown_id


@pytest.mark.parametrize(
    "text",
    [
        "t1", "nordics", "validation:rejected:x", "a/b", "v1.2", "a..b", "./a", "...", "é ü 中",
        # zero-width non-joiner and joiner: Persian spelling, emoji sequences
        "فارسی\u200cنیم", "\U0001f468\u200d\U0001f469\u200d\U0001f467 family",
        "flag\U0001f3f3\ufe0f\u200d\U0001f308", "a\xa0b",
        # the flag of Scotland: U+1F3F4, the tags g b s c t, the cancel tag U+E007F
        "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",
        "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",  # England
        "\U0001f3f4\U000e0067\U000e0062\U000e0077\U000e006c\U000e0073\U000e007f",  # Wales
    ],
)  # fmt: skip
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
        ("a\u200eb", "holds a hidden character (U+200E)", "a\\u200eb"),
        ("a\u2028b", "holds a hidden character (U+2028)", "a\\u2028b"),
        ("a\xadb", "holds a hidden character (U+00AD)", "a\\xadb"),
        ("a\u061cb", "holds a hidden character (U+061C)", "a\\u061cb"),
        ("a\U000e0041b", "holds a hidden character (U+E0041)", "a\\U000e0041b"),
        ("\U0001f3f4\U000e0067b", "holds a hidden character (U+E0067)", "\U0001f3f4\\U000e0067b"),
        # tags spelling a text, not one of the three flags: the text would go unseen
        (
            "ok\U0001f3f4\U000e0068\U000e0069\U000e007f",
            "holds a hidden character (U+E0068)",
            "ok\U0001f3f4\\U000e0068\\U000e0069\\U000e007f",
        ),
        (
            "\U0001f3f4\U000e0075\U000e0073\U000e0063\U000e0061\U000e007f",
            "holds a hidden character (U+E0075)",
            "\U0001f3f4\\U000e0075\\U000e0073\\U000e0063\\U000e0061\\U000e007f",
        ),
        ("..", "has '..' as a path segment (a folder up)", "%2E%2E"),
        ("a/../b", "has '..' as a path segment (a folder up)", "a/%2E%2E/b"),
        ("a\\..", "has '..' as a path segment (a folder up)", "a\\\\%2E%2E"),
        ("x\\x00", None, "x\\x00"),  # a backslash and text: visible
        ("%2E%2E/a\x00", "holds a NUL byte", "%252E%252E/a\\x00"),
        ("50%\t", "holds a control character (U+0009)", "50%25\\x09"),
    ],
)
def test_refused_ids_say_why_and_show_escaped(text: str, problem: str | None, shown: str) -> None:
    assert id_problem(text) == problem
    assert shown_id(text) == shown
    assert id_problem(shown) is None


def test_what_a_page_or_terminal_acts_on_is_hidden() -> None:
    import re

    from converge_dsl._escapes import HIDDEN, UNSHOWN

    acted_on = [chr(code) for code in range(0x10000) if re.match(UNSHOWN, chr(code))]
    assert all(re.match(HIDDEN, char) for char in acted_on)


def test_two_refused_ids_are_never_shown_alike() -> None:
    # before, both were shown '%2E%2E/a\x00': the second rejection's fact was lost
    assert shown_id("../a\x00") != shown_id("%2E%2E/a\x00")
