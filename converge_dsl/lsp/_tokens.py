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
from collections.abc import Iterator

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
_CODE = re.compile(
    r"""(?P<string>'[^']*'?|"[^"]*"?)|(?P<number>\d+(?:\.\d+)?)|(?P<word>[A-Za-z_]\w*)"""
    r"""|(?P<op>==|!=|<=|>=|[-+*/%<>|.,()\[\]~=:])"""
)

Token = tuple[int, int, int, int]  # line (1-based), column (1-based, code points), length, type


def tokens(document: LoadedDocument, facts: PipelineFacts) -> list[Token]:
    """Every token of every template and expression, in the order of the text."""
    found: list[Token] = []
    for site in facts.templates:
        found.extend(_site_tokens(document, site))
    return sorted(set(found))


def _site_tokens(document: LoadedDocument, site: TemplateSite) -> Iterator[Token]:
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
        state = [inside]
        for token in _line_tokens(line, start, end, state):
            yield (number, *token)
        inside = state[0]


def _line_tokens(
    line: str, start: int, end: int, state: list[str | None]
) -> Iterator[tuple[int, int, int]]:
    """(column, length, type) of the tokens of `line[start:end]`; `state[0]` is the closing
    delimiter awaited (None: in text; "": an expression, all code) and is kept up to date."""
    inside = state[0]
    index = start
    previous = ""
    while index < end:
        if inside is None:  # in text: find the next opening delimiter
            found = [(line.find(o, index, end), o) for o in _OPEN]
            found = [(at, o) for at, o in found if at >= 0]
            if not found:
                return
            at, opening = min(found)
            yield at + 1, 2, KEYWORD if opening != "{#" else COMMENT
            inside, index, previous = _OPEN[opening], at + 2, ""
            state[0] = inside
            continue
        if inside and line.startswith(inside, index):
            yield index + 1, 2, KEYWORD if inside != "#}" else COMMENT
            inside, index = None, index + 2
            state[0] = inside
            continue
        if inside == "#}":
            close = line.find("#}", index, end)
            stop = end if close < 0 else close
            yield index + 1, stop - index, COMMENT
            index = stop
            continue
        match = _CODE.match(line, index, end)
        if match is None:
            index += 1
            continue
        kind = _kind(match, previous, line, match.end())
        if kind is not None:
            yield index + 1, match.end() - index, kind
        previous = match.group(0)
        index = match.end()


def _kind(match: re.Match[str], previous: str, line: str, after: int) -> int | None:
    if match.group("string"):
        return STRING
    if match.group("number"):
        return NUMBER
    if match.group("op"):
        return OPERATOR if match.group(0) in ("|", "==", "!=", "<=", ">=", "<", ">") else None
    word = match.group(0)
    if word in _WORDS:
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
    for number, column, length, kind in found:
        start = lines.position(number, column)
        size = lines.position(number, column + length).character - start.character
        delta_line = start.line - previous_line
        delta_start = start.character - last_start if delta_line == 0 else start.character
        data.extend((delta_line, delta_start, size, kind, 0))
        previous_line, last_start = start.line, start.character
    return data
