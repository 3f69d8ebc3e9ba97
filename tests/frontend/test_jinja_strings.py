"""Jinja's string literals (`_jinja_strings`): their values as Jinja's lexer makes them,
and which source text writes each character, by YAML scalar style.

Before, CD250 read every backslash of the key's source as a YAML escape whatever the
scalar's style (`\\e` in single quotes was said to write U+001B), named no `\\L`, `\\_`
or `\\P`, and did not see `\\\\x1b` in a double-quoted scalar.
"""

from __future__ import annotations

import pytest

from converge_dsl.frontend._jinja_strings import spellings, unescape


@pytest.mark.parametrize(
    "literal",
    [
        "'plain'",
        "'tri\\x1bage'",
        "'a\\u202eb\\U0001F600c'",
        "'\\e\\q\\_\\L'",  # not Python's escapes: kept with their backslash
        "'\\\\x1b'",  # an escaped backslash, then text
        "'\\n\\t\\a\\b\\f\\v\\r\\0\\101\\'\"'",
        '"\\"double\\""',
        "'\\N{RIGHT-TO-LEFT OVERRIDE}'",
        "'\\\n'",
    ],
)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Jinja on `\\e`
def test_unescape_agrees_with_jinja(literal: str) -> None:
    from jinja2 import Environment, nodes

    const = Environment().parse("{{ " + literal + " }}").find(nodes.Const)
    assert const is not None
    assert unescape(literal) == const.value


@pytest.mark.parametrize(
    "literal",
    [
        "'\\N{NO SUCH CHARACTER}'",
        "'\\U00110000'",
        # truncated or malformed: before, kept as text, as if Jinja accepted them
        "'\\xZZ'",
        "'a\\u12'",
        "'\\U0001F60'",
        "'\\N'",
        "'\\N{open'",
    ],
)
def test_a_literal_jinja_refuses_has_no_value(literal: str) -> None:
    from jinja2 import Environment, TemplateSyntaxError

    with pytest.raises(TemplateSyntaxError):
        Environment().parse("{{ " + literal + " }}")
    assert unescape(literal) is None


def _writes(written: str, style: str | None, char: str) -> list[str]:
    return [source for made, source in spellings(written, style) if made == char]


@pytest.mark.parametrize(
    ("written", "style", "char", "sources"),
    [
        ("tri\\x1ba\\eage", "'", "\x1b", ["\\x1b"]),  # \e: YAML's, not in single quotes
        ("tri\\x1ba\\eage", None, "\x1b", ["\\x1b"]),
        ("tri\\x1ba\\eage", '"', "\x1b", ["\\x1b", "\\e"]),
        ("a\\Lb\\_c\\Pd\\Ne", '"', "\u2028", ["\\L"]),
        ("a\\Lb\\_c\\Pd\\Ne", '"', "\xa0", ["\\_"]),
        ("a\\Lb\\_c\\Pd\\Ne", '"', "\u2029", ["\\P"]),
        ("a\\Lb\\_c\\Pd\\Ne", '"', "\x85", ["\\N"]),
        ("a\\Lb", "'", "\u2028", []),
        ("a\\\\x1bb", '"', "\x1b", ["\\\\x1b"]),  # Jinja's escape, its backslash YAML's
        ("a\\\\x1bb", "'", "\x1b", []),  # an escaped backslash, then text
        ("a\u202eb\\u202e", "'", "\u202e", ["\u202e", "\\u202e"]),
        ("it''s\\x1b", "'", "\x1b", ["\\x1b"]),
        ("a\u202eb", "|", "\u202e", ["\u202e"]),
    ],
)
def test_spellings_follow_the_scalar_style(
    written: str, style: str | None, char: str, sources: list[str]
) -> None:
    assert _writes(written, style, char) == sources
