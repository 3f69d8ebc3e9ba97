"""How text nobody here wrote is shown where a character could act on its reader.

`UNSHOWN` is the class of characters a terminal or a page would act on: C0 but
newline and tab, DEL, C1 and the bidi controls (U+202A-U+202E, U+2066-U+2069).
`escaped(match)` is a matched character's visible escape, `\\xNN` below U+0100
and `\\uNNNN` above: what `frontend.terminal_safe`, the pages' `page_text` and
a location's file name (`diagnostics.one_line`) show in its place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import re

UNSHOWN = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]"


def escaped(found: re.Match[str]) -> str:
    """The visible escape of the one character `found` matched."""
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
