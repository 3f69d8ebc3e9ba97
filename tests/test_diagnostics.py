"""`converge_dsl.diagnostics` helpers shared by the stages."""

from __future__ import annotations

from converge_dsl.diagnostics import unknown_name_hint


def test_a_likely_typo_gets_did_you_mean() -> None:
    hint = unknown_name_hint("analsyt", ["analyst", "critic"], "declared: analyst, critic")
    assert hint == "did you mean 'analyst'?"


def test_a_guess_is_quoted_as_every_message_quotes_a_name() -> None:
    """A quote, a line break or a hidden character in the name guessed reads as
    `_escapes.written` writes it (as the message naming it does), not as Python's repr."""
    assert unknown_name_hint("its", ["it's"], "") == "did you mean 'it\\x27s'?"
    from converge_dsl.diagnostics import suggestion

    assert suggestion("a\nb") == "did you mean 'a\\x0ab'?"
    assert suggestion("a\u200bb\\") == "did you mean 'a\\u200bb\\\\'?"
    assert suggestion("plain") == "did you mean 'plain'?"


def test_a_guess_may_escape_what_is_not_printable() -> None:
    """With `unprintable`, a guess quotes as CD250's message quotes its key: a code
    point `str.isprintable` refuses (here unassigned) escaped too, as `written` does."""
    from converge_dsl.diagnostics import suggestion

    assert suggestion("k\U000f0000") == "did you mean 'k\U000f0000'?"
    assert suggestion("k\U000f0000", unprintable=True) == "did you mean 'k\\U000f0000'?"


def test_a_name_like_none_gets_the_fallback() -> None:
    hint = unknown_name_hint("zzz", {"analyst": 1}, "declared: analyst")
    assert hint == "declared: analyst"


def test_one_line_escapes_what_would_break_a_location() -> None:
    from converge_dsl.diagnostics import one_line

    assert one_line("plain/ü.yaml") == "plain/ü.yaml"
    assert one_line("a\nb\r\tc\x00\x85\u2029\u202e") == "a\\nb\\r\\tc\\x00\\x85\\u2029\\u202e"


def test_a_run_error_shows_its_file_on_one_line() -> None:
    from converge_dsl.diagnostics import SourceSpan
    from converge_dsl.errors import RunError

    error = RunError("it failed", span=SourceSpan("a\nb.yaml", 3, 4, 3, 5))
    assert str(error) == "a\\nb.yaml:3:4: it failed"


def test_a_span_reads_as_a_location_on_one_line() -> None:
    """Every human location (a run error's, a served request's, an evaluation case's)
    is a span's text: a file name holding a newline split it in two."""
    from converge_dsl.diagnostics import SourceSpan, location

    assert str(SourceSpan("a\nb.yaml", 4, 3, 4, 9)) == "a\\nb.yaml:4:3"
    assert location("c\tx.yaml", 18, 5) == "c\\tx.yaml:18:5"
