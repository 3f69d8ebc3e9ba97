"""Key names written as a concatenation of string literals: `count('no' ~ 'tes')`.

`parts(node)` reads an argument built only of string literals joined by `~` or
`+` (nested, parenthesised) from a tree, Jinja's or the fast path's, and
`join(parts, literals)` makes the key of it. No operator or filter runs: the
literals are joined here, and only within hard bounds (`MAX_PARTS` literals,
`MAX_LENGTH` characters, `MAX_NODES` nodes visited), so no template can make
the analysis slow or large; beyond them the key is named at run time, as any
other computed key is.

`argument(text, start)` reads a key's argument in a template's text (for the
diagnostic's caret), one literal or joined ones, escapes read as Jinja reads
them: from just after the call's `(` or the item's `[`; `span(text, start,
key)` is where it is when it makes `key`. Both give the end of its first literal
too, for a caller that maps the span to the file and finds it crosses a line there
(`LoadedDocument.joined_span`).
"""

from __future__ import annotations

import re
from typing import Any

from converge_dsl.frontend._jinja_strings import LITERAL, unescape
from converge_dsl.frontend._mininodes import Slot

MAX_PARTS = 32
# The schema bounds no key name's length; a key is a word, far shorter than this.
MAX_LENGTH = 256
MAX_NODES = 4 * MAX_PARTS


class Parts(tuple[object, ...]):
    """The literals of a joined key, in order: texts (Jinja's tree) or `Slot`s (the fast
    path's, resolved per text by `join`)."""

    __slots__ = ()


def parts(node: Any) -> Parts | None:
    """The literals of `node` when it joins two or more string literals with `~` and
    `+` only, within the bounds; else None."""
    if type(node).__name__ not in ("Concat", "Add"):
        return None
    found: list[object] = []
    stack = [node]
    visited = 0
    while stack:
        visited += 1
        current = stack.pop()
        kind = type(current).__name__
        if visited > MAX_NODES or len(stack) > MAX_PARTS:
            return None
        if kind == "Const":
            value = current.value
            if not isinstance(value, str | Slot) or len(found) == MAX_PARTS:
                return None
            found.append(value)
        elif kind == "Concat":
            if len(current.nodes) > MAX_PARTS:
                return None
            stack.extend(reversed(current.nodes))
        elif kind == "Add":
            stack.extend((current.right, current.left))
        else:
            return None
    return Parts(found)


def join(found: Parts, literals: tuple[object, ...]) -> str | None:
    """The key `found` names (its `Slot`s read from `literals`), or None when a part is
    not text or the key would be longer than `MAX_LENGTH`."""
    texts: list[str] = []
    length = 0
    for part in found:
        value = literals[part.index] if isinstance(part, Slot) else part
        if not isinstance(value, str):
            return None
        length += len(value)
        if length > MAX_LENGTH:
            return None
        texts.append(value)
    return "".join(texts)


_PIECE = re.compile(rf"\s*(?:(?P<text>{LITERAL})|(?P<op>[~+])|(?P<open>\()|(?P<close>[)\],]))")


def span(text: str, start: int, key: str) -> tuple[int, int, int] | None:
    """(start, end, end of the first literal) in `text` of the argument that begins at
    `start` when it is string literals that make `key` and nothing else (`argument`): the
    joined literals from the first quote to the last, whatever lines they are on (a
    folded scalar's line breaks are spaces of `text`: only the file tells), and the first
    literal with its quotes; one literal's characters inside its quotes, twice; else
    None."""
    found = _read(text, start)
    if found is None or found[0] != key:
        return None
    return found[1:]


def argument(text: str, start: int) -> tuple[str, tuple[int, int, int]] | None:
    """(the key, its (start, end, end of the first literal) in `text`) of the argument
    that begins at `start` when it is string literals (one, or joined by `~` and `+`) and
    nothing else, up to the argument's end (a `)`, `]` or `,` outside their parentheses):
    one literal's characters inside its quotes (twice), or the joined literals from the
    first quote to the last and the first literal with its quotes; else None.
    It reads at most `MAX_NODES` pieces, whatever follows, and `MAX_PARTS` literals, as
    `parts` does."""
    found = _read(text, start)
    return None if found is None else (found[0], found[1:])


def _read(text: str, start: int) -> tuple[str, int, int, int] | None:
    """(key, start, end, end of the first literal) of the argument at `start` (`span`)."""
    values: list[str] = []
    first = first_end = last = -1
    depth = 0
    position = start
    for _ in range(MAX_NODES):
        match = _PIECE.match(text, position)
        if match is None:
            return None
        position = match.end()
        literal = match["text"]
        if literal is not None:
            value = unescape(literal)
            if value is None or len(values) == MAX_PARTS:
                return None  # more literals than `parts` joins: no key of the tree's
            values.append(value)
            if first < 0:
                first, first_end = match.start("text"), position
            last = position
        elif match["open"] is not None:
            depth += 1
        elif match["close"] is not None:
            if depth == 0 or match["close"] != ")":
                break
            depth -= 1
    else:
        return None
    if not values:
        return None
    if len(values) == 1:
        return values[0], first + 1, last - 1, last - 1
    return "".join(values), first, last, first_end
