"""`converge_dsl._escapes`: the classes of characters a reader does not see, and how a
message quotes a text holding them."""

from __future__ import annotations

import re

import pytest

from converge_dsl._escapes import HIDDEN, written
from converge_dsl._fact_ids import written_id


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("kept\n\n", "kept\\x0a\\x0a"),  # the gate's notation, never Python's \n
        ("a\tb", "a\\x09b"),
        ("left\u202eright", "left\\u202eright"),
        ("back\\slash", "back\\\\slash"),
        ("no\xa0break", "no\xa0break"),  # a no-break space is not hidden
        ("plain", "plain"),
    ],
)
def test_written_escapes_hidden_characters_as_the_gate_does(text: str, shown: str) -> None:
    assert written(text) == shown
    assert written_id(text) == shown  # the promotion gate's reason quotes ids so


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("no\xa0break", "no\\xa0break"),
        ("em\u2003space", "em\\u2003space"),
        ("a\nb", "a\\x0ab"),
        ("caf\xe9 \u0444\u0430\u0439\u043b", "caf\xe9 \u0444\u0430\u0439\u043b"),
    ],
)
def test_written_with_unprintable_escapes_what_python_does_not_print(text: str, shown: str) -> None:
    assert written(text, unprintable=True) == shown


def test_every_hidden_character_is_unprintable() -> None:
    """`written(..., unprintable=True)` escapes a superset of `HIDDEN`."""
    hidden = [chr(c) for c in range(0x3000) if re.fullmatch(HIDDEN, chr(c))]
    assert hidden
    assert not any(char.isprintable() for char in hidden)
