"""How text nobody here wrote is shown where a character could act on its reader.

`UNSHOWN` is the class of characters a terminal or a page would act on: C0 but
newline and tab, DEL, C1 and the bidi controls (U+202A-U+202E, U+2066-U+2069).
`SHOWN_ESCAPED` is the pattern of what is shown escaped: each of those
characters, and each run of backslashes that stands right before one of them
or before text that reads as an escape (`x` and two hex digits, `u` and four).
`escaped(match)` is a match's visible form: a character as `\\xNN` below
U+0100 and `\\uNNNN` above, a run of backslashes doubled. What
`frontend.terminal_safe`, the pages' `page_text` and a location's file name
(`diagnostics.one_line`, through `shown_escaped` with its own class and
`\\n`, `\\r`, `\\t`) show in their place.

The visible form reads back one way: in it, a run of backslashes before escape
text is odd when the text is an escape (its last backslash starts it) and even
when it is not (each pair a backslash), so the U+202E of an id and the six
characters `\\u202e` of another show apart (`\\u202e` and `\\\\u202e`).
Everywhere else a backslash shows as itself (`C:\\temp`, `\\d+`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re

UNSHOWN = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"
# What `escaped` writes after a backslash, and so what a backslash before it would be read as.
ESCAPE_TEXT = "x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}"


def shown_escaped(unshown: str, letters: str = "") -> str:
    """The pattern of what is shown escaped when `unshown` (a class, `[...]`) is: each
    character of it, and each whole run of backslashes right before one, before
    `ESCAPE_TEXT`, or before one of `letters` (the letters of named escapes, such as `nrt`)."""
    named = f"|[{letters}]" if letters else ""
    # One character class first, which the regex engine scans for (it tries an alternation
    # at every character: 8 times slower on a 1.7 MB text). A backslash matches where none
    # stands before it, then takes the rest of its run whole (`*+`): a long run is read
    # once, not once from each of its backslashes.
    return rf"[\\{unshown[1:]}(?:(?<=\\)(?<!\\\\)\\*+(?={unshown}|{ESCAPE_TEXT}{named})|(?<!\\))"


SHOWN_ESCAPED = shown_escaped(UNSHOWN)


def escaped(found: re.Match[str]) -> str:
    """The visible form of what `found` matched: a run of backslashes doubled, else the
    escape of its one character."""
    text = found.group()
    if text[0] == "\\":
        return text + text
    code = ord(text)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
