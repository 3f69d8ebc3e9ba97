"""Semantic tokens for the template and expression parts of a pipeline's strings.

Editors highlight YAML; the Jinja inside `{{ }}`, `{% %}` and `{# #}` and the
whole of a `when` or `check` is plain string text to them. For each template
site of the analysis (`PipelineFacts.templates`) the file's own text of the
scalar is scanned, line by line (a block scalar's lines too): delimiters and
statements are keywords, filters and called names functions, attributes
properties, the rest variables, with strings, numbers and comments. Only the
scalar's text is read, at the source map's span: nothing is parsed again.
"""

from __future__ import annotations

import re

from converge_dsl.frontend import LoadedDocument, PipelineFacts, TemplateSite
from converge_dsl.lsp._positions import Lines, last_line

TYPES = ["keyword", "variable", "function", "property", "string", "number", "operator", "comment"]
KEYWORD, VARIABLE, FUNCTION, PROPERTY, STRING, NUMBER, OPERATOR, COMMENT = range(len(TYPES))
_WORDS = frozenset(
    (
        *("for", "in", "if", "else", "elif", "endif", "endfor", "and", "or", "not", "is"),
        *("set", "endset", "with", "endwith", "macro", "endmacro", "call", "endcall"),
        *("filter", "endfilter", "raw", "endraw", "true", "false", "none"),
        *("True", "False", "None"),
    )
)
_OPEN = {"{{": "}}", "{%": "%}", "{#": "#}"}
_TOKEN = (
    r"""(?P<string>'[^']*'?|"[^"]*"?)|(?P<number>\d+(?:\.\d+)?)|(?P<word>[A-Za-z_]\w*)"""
    r"""|(?P<op>==|!=|<=|>=|[-+*/%<>|.,()\[\]~=:])"""
)
# The code's tokens, and the closing delimiter awaited before any ("": an expression, none).
_CODE = {
    closing: re.compile((f"(?P<close>{re.escape(closing)})|" if closing else "") + _TOKEN)
    for closing in ("}}", "%}", "")
}
_OPENING = re.compile(r"\{[{%#]")
_OPERATORS = frozenset(("|", "==", "!=", "<=", ">=", "<", ">"))

Token = tuple[int, int, int, int]  # line (1-based), column (1-based, code points), length, type


def tokens(document: LoadedDocument, facts: PipelineFacts) -> list[Token]:
    """Every token of every template and expression, in the order of the text."""
    found: list[Token] = []
    for site in facts.templates:
        _site_tokens(document, site, found)
    return sorted(set(found))


def _site_tokens(document: LoadedDocument, site: TemplateSite, found: list[Token]) -> None:
    """Add the tokens of `site` to `found`."""
    location = document.source_map.get(site.path)
    if location is None:
        return
    span, style = location.span, location.style
    block = style in ("|", ">")
    first = span.line + 1 if block else span.line
    last = last_line(document, span)
    inside: str | None = "" if site.expression else None  # "" = in code, no closing delimiter
    for number in range(first, last + 1):
        line = document.line(number)
        start = span.column - 1 if number == span.line and not block else 0
        end = span.end_column - 1 if number == span.end_line and not block else len(line)
        if style in ("'", '"'):
            start += 1 if number == span.line else 0
            end -= 1 if number == span.end_line else 0
        inside = _line_tokens(line, number, start, end, inside=inside, found=found)


def _line_tokens(
    line: str, number: int, start: int, end: int, *, inside: str | None, found: list[Token]
) -> str | None:
    """Add the tokens of `line[start:end]` (line `number`) to `found`; `inside` is the
    closing delimiter awaited at `start` (None: in text; "": an expression, all code), and
    the one awaited at `end` is returned."""
    index = start
    previous = ""
    while index < end:
        if inside is None:  # in text: find the next opening delimiter
            opening = _OPENING.search(line, index, end)
            if opening is None:
                return None
            at = opening.start()
            found.append((number, at + 1, 2, KEYWORD if opening.group() != "{#" else COMMENT))
            inside, index, previous = _OPEN[opening.group()], at + 2, ""
            continue
        if inside == "#}":
            close = line.find("#}", index, end)
            stop = end if close < 0 else close
            if stop > index:
                found.append((number, index + 1, stop - index, COMMENT))
            if close < 0:
                return inside
            found.append((number, close + 1, 2, COMMENT))
            inside, index = None, close + 2
            continue
        # In code: each token up to the closing delimiter (a string holding it is a string).
        for match in _CODE[inside].finditer(line, index, end):
            group, text = match.lastgroup, match.group()
            if group == "close":
                found.append((number, match.start() + 1, 2, KEYWORD))
                inside, index = None, match.end()
                break
            kind = _kind(group, text, previous, line, match.end())
            if kind is not None:
                found.append((number, match.start() + 1, len(text), kind))
            previous = text
        else:
            return inside
    return inside


def _kind(group: str | None, text: str, previous: str, line: str, after: int) -> int | None:
    if group == "string":
        return STRING
    if group == "number":
        return NUMBER
    if group == "op":
        return OPERATOR if text in _OPERATORS else None
    if text in _WORDS:
        return KEYWORD
    if previous == "|":
        return FUNCTION
    if previous == ".":
        return PROPERTY
    if line[after : after + 1] == "(":
        return FUNCTION
    return VARIABLE


def encode(found: list[Token], lines: Lines) -> list[int]:
    """The protocol's relative encoding (UTF-16 columns)."""
    data: list[int] = []
    previous_line, last_start = 0, 0
    point = lines.editor_point
    current, plain = 0, False
    for number, column, length, kind in found:  # by line: each line's kind is asked once
        if number != current:
            current, plain = number, lines.plain(number)
        if plain:
            line, start, size = number - 1, column - 1, length
        else:
            line, start = point(number, column)
            size = point(number, column + length)[1] - start
        delta_line = line - previous_line
        data.extend((delta_line, start - last_start if delta_line == 0 else start, size, kind, 0))
        previous_line, last_start = line, start
    return data
