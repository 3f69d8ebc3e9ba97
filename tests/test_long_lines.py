"""`head_and_tail`: a long text quoted by both its ends, with what was cut said."""

from __future__ import annotations

from converge_dsl._long_lines import head_and_tail
from converge_dsl.compiler._common import QUOTED_CHARS, quoted
from converge_dsl.sandbox._schema_bounds import MESSAGE_CHARS, short_message


def test_a_short_text_is_kept_whole() -> None:
    assert head_and_tail("abc", 3) == "abc"
    assert quoted("x" * QUOTED_CHARS) == "x" * QUOTED_CHARS


def test_a_long_text_keeps_its_start_and_its_end_and_says_its_length() -> None:
    assert head_and_tail("abcdefghij", 4) == "ab\u2026 [6 of 10 characters cut] \u2026ij"


def test_a_quoted_traceback_keeps_its_last_line() -> None:
    # The quote kept only the first 1,000 characters: a traceback lost the line that
    # names its error, and a capped tool result its "[result cut: ...]" marker.
    frames = "".join(f'  File "t.py", line {n}, in f\n    f()\n' for n in range(200))
    text = f"Traceback (most recent call last):\n{frames}RecursionError: too deep"
    said = quoted(text)
    assert said.startswith("Traceback (most recent call last):\n")
    assert said.endswith("\nRecursionError: too deep")
    assert f" of {len(text)} characters cut] " in said
    marked = "no such ticket " * 200 + "\n[result cut: 50010 bytes, over the cap of 2048]"
    assert quoted(marked).endswith("[result cut: 50010 bytes, over the cap of 2048]")


def test_a_schema_message_is_cut_the_same_way() -> None:
    message = "'" + "x" * 2000 + "' is not of type 'integer'"
    assert short_message(message) == head_and_tail(message, MESSAGE_CHARS)
    assert short_message(message).endswith("' is not of type 'integer'")
