"""The human renderer: terminal-safe text and excerpts cut around the caret."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.diagnostics import Diagnostic, Severity
from converge_dsl.frontend._render import EXCERPT_WIDTH, render_human, terminal_safe


def _diag(line: int, column: int, end_column: int, message: str = "bad") -> Diagnostic:
    return Diagnostic(
        code="CD100",
        severity=Severity.ERROR,
        message=message,
        file="p.yaml",
        line=line,
        column=column,
        end_line=line,
        end_column=end_column,
    )


def test_controls_and_bidi_are_escaped_visibly() -> None:
    text = "a\x1b[2J\x1b]0;pwned\x07\u202eevil\x00\x9b\u2066 ok\n\tnext"
    assert terminal_safe(text) == (
        "a\\x1b[2J\\x1b]0;pwned\\x07\\u202eevil\\x00\\x9b\\u2066 ok\n\tnext"
    )


@given(st.text())
def test_safe_text_has_no_terminal_controls(text: str) -> None:
    safe = terminal_safe(text)
    assert not any(ord(c) < 0x20 and c not in "\n\t" for c in safe)
    assert not any(0x7F <= ord(c) <= 0x9F for c in safe)
    assert not any("\u202a" <= c <= "\u202e" or "\u2066" <= c <= "\u2069" for c in safe)


def test_excerpt_and_message_are_escaped_and_caret_follows() -> None:
    source = 'id: "\x1b[31mx"\n'
    out = render_human([_diag(1, 11, 12, "id \x1b[2J")], {"p.yaml": source})
    assert "\x1b" not in out
    assert "id \\x1b[2J" in out
    shown, caret = out.splitlines()[3:5]
    assert shown == '1 | id: "\\x1b[31mx"'
    assert caret.index("^") == shown.index('x"')


def test_an_excerpt_quotes_the_backslashes_of_its_line_as_written() -> None:
    """A YAML escape the user typed is shown as typed, in the excerpt and in the message: a
    reversible form that doubled a backslash before escape text showed `"caf\\\\u00e9"`."""
    source = 'id: "caf\\u00e9 \\x41 C:\\temp \u202e"\n'
    out = render_human([_diag(1, 5, 6, "id 'caf\\u00e9'")], {"p.yaml": source})
    shown, caret = out.splitlines()[3:5]
    assert shown == '1 | id: "caf\\u00e9 \\x41 C:\\temp \\u202e"'
    assert caret.index("^") == shown.index('"')
    assert out.splitlines()[0].endswith("id 'caf\\u00e9'")


def test_an_excerpt_shows_hidden_characters_escaped_and_its_caret_counts_them() -> None:
    """Tag characters, a zero-width space, a byte-order mark and a direction mark reached the
    terminal raw, so a line could show text other than its file holds (Trojan Source); a
    flag Unicode recommends (a tag sequence drawn as England's) is kept as it is."""
    england = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"
    source = f"- {{id: a\u200b\ufeff, x\U000e0061\u200ey: 1, c: {england}, z: 2}}\n"
    column = source.index("x") + 1
    out = render_human([_diag(1, column, column + 4)], {"p.yaml": source})
    shown, caret = out.splitlines()[3:5]
    assert shown == (f"1 | - {{id: a\\u200b\\ufeff, x\\U000e0061\\u200ey: 1, c: {england}, z: 2}}")
    assert caret.index("^") == shown.index("x\\U")
    assert caret.count("^") == len("x\\U000e0061\\u200ey")


def test_long_line_is_cut_to_a_window_around_the_caret() -> None:
    line = "k: " + "a" * 500_000 + "BAD" + "b" * 500_000
    column = line.index("BAD") + 1
    out = render_human([_diag(1, column, column + 3)], {"p.yaml": line + "\n"})
    shown, caret = out.splitlines()[3:5]
    assert len(shown) <= EXCERPT_WIDTH + 10
    assert shown.startswith("1 | …")
    assert shown.endswith("…")
    assert caret.index("^") == shown.index("BAD")
    assert caret.count("^") == 3


def test_underline_of_a_long_span_is_capped_to_the_window() -> None:
    line = "k: " + "a" * 10_000
    out = render_human([_diag(1, 4, len(line) + 1)], {"p.yaml": line})
    shown, caret = out.splitlines()[3:5]
    assert shown.endswith("…")
    assert len(caret) <= len(shown)
    assert caret.index("^") == shown.index("a")


def test_short_lines_are_unchanged() -> None:
    out = render_human([_diag(1, 4, 7)], {"p.yaml": "k: abc\n"})
    assert out.splitlines()[3:5] == ["1 | k: abc", "  |    ^^^"]


def test_a_file_name_with_a_newline_keeps_its_location_on_one_line() -> None:
    name = "a\nb\r\t\u2028\x1b.yaml"
    diagnostic = _diag(1, 1, 3)._replace(file=name)
    out = render_human([diagnostic], {name: "id: x\n"})
    assert out.splitlines()[1] == " --> a\\nb\\r\\t\\u2028\\x1b.yaml:1:1"
    assert out.splitlines()[3] == "1 | id: x"  # the excerpt still found under the real name


@given(st.text())
def test_a_location_is_one_line_whatever_the_file_name(name: str) -> None:
    out = render_human([_diag(1, 1, 2)._replace(file=name)], {})
    assert len(out.splitlines()) == 2  # the message line and the location line
    assert len(out.rstrip("\n").split("\n")) == 2


def test_a_json_lines_excerpt_counts_lines_at_newlines_only() -> None:
    """A U+2028 (or U+0085, a form feed) inside a JSON string is no line break to `run
    --cases`, which locates a case by `jsonl_lines`: the excerpt is the case's line."""
    source = '{"id":"a","word":"x\u2028y\x85z\x0c"}\n{"id":"b","wrod":"y"}\n'
    diagnostic = _diag(2, 11, 17)._replace(file="cases.jsonl")
    out = render_human([diagnostic], {"cases.jsonl": source})
    shown, caret = out.splitlines()[3:5]
    assert shown == '2 | {"id":"b","wrod":"y"}'
    assert caret[caret.index("^") :] == "^" * len('"wrod"')
    assert caret.index("^") == shown.index('"wrod"')


def test_a_yaml_excerpt_counts_lines_at_yaml_line_breaks() -> None:
    """PyYAML's marks count U+2028 and U+0085 as line breaks, not a form feed (a character
    YAML refuses, located on its line): the caret lands on it, not past a line's end."""
    source = 'a: "x\u2028"\nb: y\x85c: "1\x0c2"\n'
    out = render_human([_diag(4, 6, 7)], {"p.yaml": source})
    shown, caret = out.splitlines()[3:5]
    assert shown == '4 | c: "1\\x0c2"'
    assert caret.index("^") == shown.index("\\x0c")


_ENGLAND = "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"


def test_every_part_a_human_rendering_prints_escapes_hidden_characters() -> None:
    """Before, only the excerpt escaped them: a message or hint built from Jinja's,
    jsonschema's or a check's own words (`fields: a\u200bb`), or a file name, reached
    the terminal raw, in the text and the GitHub forms. Now each part is escaped
    where it is rendered; text a message already escaped is kept, and JSON keeps it raw."""
    from converge_dsl.frontend._render import render_github, render_json

    diagnostic = Diagnostic(
        code="CD900",
        severity=Severity.ERROR,
        message=f"no field 'zz\\u200bzz'; fields: a\u200bb, c\U000e0041d, {_ENGLAND}\nnext",
        file="p\u200b.yaml",
        line=1,
        column=1,
        end_line=1,
        end_column=2,
        hint="at /cat\u200begory\u00ad",
    )
    text = render_human([diagnostic], {"p\u200b.yaml": "k: v\n"})
    github = render_github([diagnostic])
    for out in (text, github.split("title=CD900", 1)[1]):
        assert "\u200b" not in out
        assert "\U000e0041" not in out
        assert "\xad" not in out
        assert "no field 'zz\\u200bzz'; fields: a\\u200bb, c\\U000e0041d" in out
        assert _ENGLAND in out
        assert "at /cat\\u200begory\\xad" in out
    assert "--> p\\u200b.yaml:1:1" in text
    assert f"{_ENGLAND}\nnext" in text
    assert "fields: a\u200bb" in render_json([diagnostic])


def test_a_long_line_of_hidden_characters_is_cut_to_the_columns_shown() -> None:
    """Before, the window was cut on the line's characters, then escaped: 300 tag
    characters around a mark made an excerpt of about 800 columns. Now it is cut after
    escaping, at an escape's edge, to `EXCERPT_WIDTH` columns shown."""
    tags = "\U000e0041" * 300
    line = f"k: '{tags}' == BAD or '{tags}'"
    column = line.index("BAD") + 1
    out = render_human([_diag(1, column, column + 3)], {"p.yaml": line + "\n"})
    shown, caret = out.splitlines()[3:5]
    excerpt = shown.removeprefix("1 | ")
    assert len(excerpt) <= EXCERPT_WIDTH
    assert re.fullmatch(r"…(\\U000e0041)+' == BAD or '(\\U000e0041)+…", excerpt)
    assert caret.index("^") == shown.index("BAD")


@pytest.mark.parametrize(
    "before",
    [
        "漢字漢字",
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",
        "e\u0301e\u0301",
        "\U0001f1eb\U0001f1f7",
        "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    ],
    ids=["cjk", "zwj", "combining", "flag", "tag-flag"],
)
def test_a_caret_is_placed_by_the_columns_a_terminal_shows(before: str) -> None:
    """Before, the caret's offset counted characters: after CJK (two columns each), an
    emoji sequence or combining marks it was off. Now it counts terminal columns."""
    from rich.cells import cell_len

    line = f"k: '{before}' == BAD"
    column = line.index("BAD") + 1
    out = render_human([_diag(1, column, column + 3, "x")], {"p.yaml": line + "\n"})
    shown, caret = out.splitlines()[3:5]
    assert caret.index("^") == cell_len(shown[: shown.index("BAD")])
    assert caret.count("^") == 3
    out = render_human([_diag(1, 5, 5 + len(before), "x")], {"p.yaml": line + "\n"})
    caret = out.splitlines()[4]
    assert caret.count("^") == cell_len(before)
