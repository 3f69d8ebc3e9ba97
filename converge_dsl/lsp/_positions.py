"""Where things are: LSP positions (0-based, UTF-16) and the loader's spans (1-based, code points).

The loader's source map answers "where is this JSON path"; the editor asks the
opposite, "what is at this position". `path_at` walks the document's data from
the root, asking the source map for each child's span (a sequence's items by
bisection, so a 1,000-suggestor list costs ten lookups), and stops at the
deepest node or key that holds the position. Nothing here reads YAML.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsprotocol import types as lsp

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend import LoadedDocument

Point = tuple[int, int]  # (line, column), 1-based, code points: the loader's units


def utf16_column(line: str, column: int) -> int:
    """The 0-based UTF-16 column of the 1-based code-point `column` of `line`."""
    before = line[: max(column - 1, 0)]
    if before.isascii():
        return len(before)
    return len(before.encode("utf-16-le")) // 2


def code_point_column(line: str, character: int) -> int:
    """The 1-based code-point column of the 0-based UTF-16 `character` of `line`; past the
    line's end, its end."""
    if line.isascii():
        return min(character, len(line)) + 1
    units = 0
    for index, char in enumerate(line):
        if units >= character:
            return index + 1
        units += 2 if ord(char) > 0xFFFF else 1
    return len(line) + 1


class Lines:
    """A text split into lines once, converting between the two kinds of position."""

    __slots__ = ("lines",)

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")

    def line(self, number: int) -> str:
        """Line `number` (1-based) without its end; "" past the end."""
        if 1 <= number <= len(self.lines):
            return self.lines[number - 1].removesuffix("\r")
        return ""

    def position(self, line: int, column: int) -> lsp.Position:
        return lsp.Position(max(line - 1, 0), utf16_column(self.line(line), column))

    def range(self, span: SourceSpan) -> lsp.Range:
        return lsp.Range(
            self.position(span.line, span.column), self.position(span.end_line, span.end_column)
        )

    def point(self, position: lsp.Position) -> Point:
        """The loader's point of an editor's position; a position past the text's end is
        its end, and one past a line's end that line's end (as the protocol reads them)."""
        line = position.line + 1
        if line > len(self.lines):
            last = len(self.lines)
            return last, len(self.line(last)) + 1
        return line, code_point_column(self.line(line), position.character)

    def offset(self, point: Point) -> int:
        """The offset in the text of a 1-based (line, column)."""
        line, column = point
        return sum(len(text) + 1 for text in self.lines[: line - 1]) + column - 1


def contains(span: SourceSpan, point: Point) -> bool:
    """Whether `point` lies in `span`, its end included (a cursor just after a word)."""
    return (span.line, span.column) <= point <= (span.end_line, span.end_column)


class Hit:
    """What `path_at` found: the JSON path and whether the position is on its key."""

    __slots__ = ("on_key", "path", "span")

    def __init__(self, path: JsonPath, on_key: bool, span: SourceSpan | None) -> None:
        self.path = path
        self.on_key = on_key
        self.span = span


def path_at(document: LoadedDocument, point: Point) -> Hit:
    """The deepest node (or mapping key) of `document` whose span holds `point`."""
    source_map = document.source_map
    data: Any = document.data
    path: JsonPath = ()
    span: SourceSpan | None = None
    while isinstance(data, dict | list):
        step = _child_at(document, path, data, point)
        if step is None:
            break
        child, value = step
        location = source_map.get((*path, child))
        if location is None:
            break
        path = (*path, child)
        if location.key_span is not None and contains(location.key_span, point):
            return Hit(path, True, location.key_span)
        span, data = location.span, value
    return Hit(path, False, span)


def _child_at(
    document: LoadedDocument, path: JsonPath, data: dict[str, Any] | list[Any], point: Point
) -> tuple[str | int, Any] | None:
    source_map = document.source_map
    if isinstance(data, list):
        return _item_at(document, path, data, point)
    for key, value in data.items():
        location = source_map.get((*path, key))
        if location is None:
            continue
        if location.key_span is not None and contains(location.key_span, point):
            return key, value
        if contains(location.span, point):
            return key, value
    return None


def _item_at(
    document: LoadedDocument, path: JsonPath, items: Sequence[Any], point: Point
) -> tuple[int, Any] | None:
    """The item whose span holds `point`: items are in order, so bisect on their starts."""
    source_map = document.source_map
    low, high = 0, len(items)
    while low < high:
        middle = (low + high) // 2
        span = source_map.span((*path, middle))
        if (span.line, span.column) <= point:
            low = middle + 1
        else:
            high = middle
    index = low - 1
    if index >= 0 and contains(source_map.span((*path, index)), point):
        return index, items[index]
    return None


def last_line(document: LoadedDocument, span: SourceSpan) -> int:
    """The last line a node's text is on: a block collection's span ends where the next
    token starts (a line below, at or before its indentation)."""
    if span.end_line <= span.line:
        return span.end_line
    line = document.line(span.end_line)
    indentation = len(line) - len(line.lstrip())
    return span.end_line - 1 if span.end_column <= indentation + 1 else span.end_line
