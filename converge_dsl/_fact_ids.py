"""Which texts can name a fact: one rule for `validate` (literal ids) and the run's gate.

A fact id is shown in reports, traces, the server's events and the pages, and
compared by people: `id_problem(text)` refuses one holding a NUL byte, another
control character (line breaks and tabs included), a character most editors
and pages do not show (`converge_dsl._escapes.HIDDEN`: a bidi control, a
zero-width space or direction mark (the Arabic letter mark too), a line or
paragraph separator, a soft hyphen, a byte-order mark, a tag character; not the
zero-width joiners, which spell words and emoji, nor the tags of the flags of
England, Scotland and Wales, Unicode's three recommended tag sequences), or a
`..` segment between slashes (`a/../b`), which reads as a path up a folder.
Anything else is an id as before.
`id_refusal(text)` is the promotion gate's reason for an id it refuses (a blank
one too), as the gate and an agent's `context.propose` tool both say it.
`shown_id(text)` is an id fit to show and store in its place: itself when
allowed, else its characters escaped, `%` written `%25` and a `..` segment
`%2E%2E` (one to one: two refused ids never show alike); `written_id(text)`, the
same escape of its characters alone, is how a refusal's reason quotes it.
"""

from __future__ import annotations

import re

from converge_dsl._escapes import HIDDEN, written

_HIDDEN = re.compile(HIDDEN)
_PARENT = re.compile(r"(?:^|(?<=[/\\]))\.\.(?=[/\\]|$)")


def id_problem(text: str) -> str | None:
    """Why `text` cannot be a fact id (`holds a NUL byte`...), or None."""
    # a match of more than one character is one of the three flags: allowed
    found = next((m for m in _HIDDEN.finditer(text) if len(m.group()) == 1), None)
    if found is not None:
        char = found.group()
        if char == "\x00":
            return "holds a NUL byte"
        kind = "a control" if ord(char) < 0xA0 else "a hidden"
        return f"holds {kind} character (U+{ord(char):04X})"
    if "." in text and _PARENT.search(text) is not None:
        return "has '..' as a path segment (a folder up)"
    return None


def id_refusal(text: str) -> str | None:
    """Why the promotion gate refuses `text` as a fact id, as its reason reads
    (`blank id`, `id 'a\\x00b' holds a NUL byte`), or None."""
    if not text.strip():
        return "blank id"
    problem = id_problem(text)
    return None if problem is None else f"id '{written_id(text)}' {problem}"


def shown_id(text: str) -> str:
    """`text` when it is an allowed id, else a form of it that is one (to show and
    store where the refused id would go): `written_id`'s, with `%` written `%25` and a
    `..` segment `%2E%2E`, so two refused ids are never shown alike."""
    if id_problem(text) is None:
        return text
    return _PARENT.sub("%2E%2E", written_id(text).replace("%", "%25"))


def written_id(text: str) -> str:
    """`text` as every message quotes a text (`converge_dsl._escapes.written`: a backslash
    doubled; a hidden character, a space that is not U+0020 and the quote escaped,
    `\\x00`, `\\u202e`, `\\x27`): how a refusal's reason quotes the id
    (`id 'a\\x00b' holds a NUL byte`)."""
    return written(text)
