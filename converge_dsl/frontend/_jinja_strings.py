"""Jinja's string literals and how a file writes their characters.

A key read by name is a string literal of a template, itself the value of a
YAML scalar, so one character of the key may be written three ways in the
file: as itself, as an escape of the YAML scalar (only a double-quoted one has
escapes: `\\x1b`, `\\e`, `\\N`, `\\_`, `\\L`, `\\P`...), or as an escape of the
Jinja string (Python's: `\\x1b`, `\\u202e`, `\\n`..., in any scalar style; in a
double-quoted scalar its backslash is written `\\\\`).

`unescape(literal)` is the value Jinja gives a string literal (quotes
included), without running Python's codec on text a template controls;
`spellings(written, style)` pairs each character a written string literal
makes with the source text that writes it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator

LITERAL = r"""'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*\""""  # Jinja's lexer's
# Python's string escapes, as Jinja's lexer decodes them ("unicode-escape"); a backslash
# before any other character is kept, with that character.
_JINJA_ESCAPE = re.compile(
    r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}\\]{1,100}\}|[0-7]{1,3}|.)",
    re.DOTALL,
)
_NAMED = {"\n": "", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f"}
_NAMED |= {"n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _escaped(escape: str) -> str | None:
    """The text Jinja makes of one escape (`\\x1b`, `\\n`, `\\e`); None where Jinja
    refuses the template: a `\\x`, `\\u`, `\\U` or `\\N` not followed by what it
    takes (`\\xZZ`, `\\u12`, `\\N` with no `{name}`), a `\\N{...}` that names no
    character, a `\\U` beyond Unicode."""
    letter = escape[1]
    if letter in "xuUN" and len(escape) == 2:
        return None
    if letter in _NAMED and len(escape) == 2:
        return _NAMED[letter]
    if letter in "xuU" and len(escape) > 2:
        code = int(escape[2:], 16)
        return chr(code) if code <= 0x10FFFF else None
    if letter == "N" and len(escape) > 2:
        try:
            return unicodedata.lookup(escape[3:-1])
        except KeyError:
            return None
    if letter in "01234567":
        return chr(int(escape[1:], 8))
    return escape  # not an escape: the backslash and its character


def unescape(literal: str) -> str | None:
    """The value of the Jinja string `literal` (with its quotes), or None if Jinja refuses it."""
    if "\\" not in literal:
        return literal[1:-1]
    values: list[str] = []
    end = 0
    body = literal[1:-1]
    for match in _JINJA_ESCAPE.finditer(body):
        value = _escaped(match.group())
        if value is None:
            return None
        values.append(body[end : match.start()])
        values.append(value)
        end = match.end()
    values.append(body[end:])
    return "".join(values)


def spellings(written: str, style: str | None) -> Iterator[tuple[str, str]]:
    """(character, the source text that writes it) for each character of the template
    text that `written` (source text of a scalar of `style`, within string literals of a
    template) makes, in order."""
    from converge_dsl.frontend.document import scalar_pieces

    pieces = list(scalar_pieces(written, style))
    text = "".join(piece for _, _, piece in pieces)
    starts: list[int] = []  # the source offset of each character of `text`
    ends: list[int] = []
    for start, end, piece in pieces:
        starts.extend([start] * len(piece))
        ends.extend([end] * len(piece))
    at = 0
    for match in _JINJA_ESCAPE.finditer(text):
        for index in range(at, match.start()):
            yield text[index], written[starts[index] : ends[index]]
        source = written[starts[match.start()] : ends[match.end() - 1]]
        value = _escaped(match.group())
        if value is not None and len(value) == 1:
            yield value, source
        at = match.end()
    for index in range(at, len(text)):
        yield text[index], written[starts[index] : ends[index]]


def literal_spans(text: str, *, expression: bool) -> dict[str, list[tuple[int, int]]]:
    """Each value of a string literal of template `text` (a bare expression with
    `expression`, as the sandbox reads one) -> the (start, end) in `text` of each literal
    that makes it, in order. Read once by Jinja's own lexer: a quote inside another
    literal, in a comment or a raw block opens none; a template the lexer refuses gives
    the literals before the refusal."""
    import jinja2

    from converge_dsl.sandbox import environment

    normal, origin = _normal_newlines(text)
    spans: dict[str, list[tuple[int, int]]] = {}
    at = 0
    tokens = environment().lexer.tokeniter(normal, None, state="variable" if expression else None)
    try:
        for _, kind, value in tokens:
            # The lexer gives every piece of the text in order; only a whitespace control
            # (`-}}`) drops some: the next piece is found on.
            start = normal.find(value, at)
            if start < 0:
                break
            at = start + len(value)
            if kind == "string":
                made = unescape(value)
                if made is not None:
                    spans.setdefault(made, []).append((origin(start), origin(at - 1) + 1))
    except jinja2.TemplateSyntaxError:
        pass
    return spans


def _normal_newlines(text: str) -> tuple[str, Callable[[int], int]]:
    """`text` with each line break as `\\n`, as Jinja's lexer reads it, and the map of an
    offset of it back to `text`'s (a `\\r\\n` is one character of it)."""
    if "\r" not in text:
        return text, int
    kept = [at for at, char in enumerate(text) if char != "\r" or text[at + 1 : at + 2] != "\n"]
    return re.sub("\r\n|\r", "\n", text), kept.__getitem__
