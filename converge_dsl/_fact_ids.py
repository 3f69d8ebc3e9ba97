"""Which texts can name a fact: one rule for `validate` (literal ids) and the run's gate.

A fact id is shown in reports, traces, the server's events and the pages, and
compared by people: `id_problem(text)` refuses one holding a NUL byte, another
control character (line breaks and tabs included), a character most editors
and pages do not show (a bidi control, a zero-width one, a line or paragraph
separator, a byte-order mark), or a `..` segment between slashes (`a/../b`),
which reads as a path up a folder. Anything else is an id as before.
`shown_id(text)` is an id fit to show and store in its place: itself when
allowed, else its characters escaped and a `..` segment written `%2E%2E`.
"""

from __future__ import annotations

import re

from converge_dsl._escapes import escaped

# C0 and C1 controls, DEL; bidi controls; zero-width and direction marks; separators; BOM.
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_PARENT = re.compile(r"(?:^|(?<=[/\\]))\.\.(?=[/\\]|$)")


def id_problem(text: str) -> str | None:
    """Why `text` cannot be a fact id (`holds a NUL byte`...), or None."""
    found = _HIDDEN.search(text)
    if found is not None:
        char = found.group()
        if char == "\x00":
            return "holds a NUL byte"
        kind = "a control" if ord(char) < 0xA0 else "a hidden"
        return f"holds {kind} character (U+{ord(char):04X})"
    if "." in text and _PARENT.search(text) is not None:
        return "has '..' as a path segment (a folder up)"
    return None


def shown_id(text: str) -> str:
    """`text` when it is an allowed id, else a form of it that is one (to show and
    store where the refused id would go)."""
    if id_problem(text) is None:
        return text
    visible = _HIDDEN.sub(escaped, text.replace("\\", "\\\\"))
    return _PARENT.sub("%2E%2E", visible)
