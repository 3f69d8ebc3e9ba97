"""How text is shown where a character could act on its reader (`converge_dsl._escapes`):
the same visible form in the terminal, the pages and a location's file name, and one
that reads back one way."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl._page_assets import page_json, page_text
from converge_dsl.diagnostics import one_line
from converge_dsl.frontend import terminal_safe

_NAMED = {"n": "\n", "r": "\r", "t": "\t"}


def _read_back(shown: str, named: bool = False) -> str:
    """The text whose visible form is `shown`: a run of backslashes before escape text
    is odd when the text is an escape, even when it is not (each pair one backslash)."""
    escape = re.compile(r"x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}" + ("|[nrt]" if named else ""))
    out, i = [], 0
    while i < len(shown):
        run = len(shown[i:]) - len(shown[i:].lstrip("\\"))
        found = escape.match(shown, i + run) if run else None
        if found is None:
            out.append(shown[i : i + max(run, 1)])
            i += max(run, 1)
        elif run % 2 == 0:
            out.append("\\" * (run // 2))
            i += run
        else:
            code = found.group()
            out.append("\\" * (run // 2) + (_NAMED.get(code) or chr(int(code[1:], 16))))
            i = found.end()
    return "".join(out)


SHOWN: list[tuple[str, Callable[[str], str], bool]] = [
    ("terminal_safe", terminal_safe, False),
    ("page_text", page_text, False),
    ("page_json", lambda text: str(json.loads(page_json(text))), False),
    ("one_line", one_line, True),
]


@pytest.mark.parametrize(("name", "show", "named"), SHOWN, ids=[s[0] for s in SHOWN])
def test_a_character_and_its_escapes_text_show_apart(
    name: str, show: Callable[[str], str], named: bool
) -> None:
    # Both showed as `ctl\u202ex`: a fact's id holding U+202E, and another holding the
    # six characters of its escape.
    control, text = show("ctl\u202ex"), show("ctl\\u202ex")
    assert control == "ctl\\u202ex"
    assert text == "ctl\\\\u202ex"
    assert show("\\\x07") == "\\\\\\x07"  # a backslash, then BEL
    assert show("\\\\x41") == "\\\\\\\\x41"  # two backslashes, then the text x41


@pytest.mark.parametrize(("name", "show", "named"), SHOWN, ids=[s[0] for s in SHOWN])
def test_a_backslash_elsewhere_shows_as_itself(
    name: str, show: Callable[[str], str], named: bool
) -> None:
    for text in ("\\d+ and \\w", "C:\\Users\\x", "a \\\\ b", "\\u12", "\\xg1", "\\"):
        assert show(text) == text
    assert show("C:\\temp\\new") == ("C:\\\\temp\\\\new" if named else "C:\\temp\\new")


_TEXTS = st.text(alphabet=st.sampled_from("\\xu0e2Ffnrt \n\t\r\x07\x1b\x7f\x85\u202e\u2028"))


@pytest.mark.parametrize(("name", "show", "named"), SHOWN, ids=[s[0] for s in SHOWN])
@given(text=_TEXTS)
def test_what_is_shown_reads_back_to_the_text(
    name: str, show: Callable[[str], str], named: bool, text: str
) -> None:
    if not named:  # the terminal and the pages keep newline, tab and U+2028 as they are
        assert _read_back(show(text)) == text
    else:
        assert _read_back(show(text), named=True) == text
