"""Where things are: LSP positions (0-based, UTF-16) and the loader's spans (1-based, code points).

The loader's source map answers "where is this JSON path"; the editor asks the
opposite, "what is at this position". `path_at` walks the document's data from
the root, asking the source map for each child's span (a sequence's items by
bisection, so a 1,000-suggestor list costs ten lookups), and stops at the
deepest node or key that holds the position. Nothing here reads YAML.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lsprotocol import types as lsp

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend import LoadedDocument
from converge_dsl.frontend.document import OTHER_BREAKS

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


# The protocol's line breaks; YAML also breaks lines on NEL, LS and PS (the loader's lines).
_BREAK = re.compile("\r\n|\r|\n")
YAML_ONLY = re.compile(f"[{OTHER_BREAKS}]")
_BOM = "\ufeff"


class Lines:
    """A text split into lines once, converting between the two kinds of position.

    Line numbers given or returned with a column are the loader's (YAML's lines: a line
    ends at `\\n`, `\\r\\n`, `\\r`, U+0085, U+2028 or U+2029); an `lsp.Position`'s line
    is the protocol's (`\\n`, `\\r\\n` or `\\r` only). The two differ only in a text
    holding one of YAML's other breaks: there a protocol line holds several of the
    loader's, each starting at its column there (`_starts`). A byte order mark starting
    the text is not in the loader's first line (the loader drops it) and is a character of
    the protocol's first line: columns there differ by one (`_bom`). `newline` is the
    text's own line break, its first (`\\n` in a text of one line): what an edit that
    adds lines writes."""

    __slots__ = ("_bom", "_editor", "_first", "_starts", "lines", "newline")

    def __init__(self, text: str) -> None:
        editor = text.split("\n") if "\r" not in text else _BREAK.split(text)
        first = _BREAK.search(text) if "\r" in text else None
        self.newline = first.group() if first is not None else "\n"
        # Each loader line's protocol line and code-point column there (None: the same lines).
        self._starts: list[tuple[int, int]] | None = None
        self._first: list[int] = []  # each protocol line's first loader line (0-based)
        self._editor = editor
        self._bom = int(text.startswith(_BOM))
        if not any(mark in text for mark in OTHER_BREAKS):  # a search as fast as memchr
            # the loader's lines, without their line breaks
            self.lines = [editor[0][1:], *editor[1:]] if self._bom else editor
            return
        self.lines, self._starts = [], []
        lines: list[str] = self.lines
        for index, line in enumerate(editor):
            self._first.append(len(self.lines))
            column = self._bom if index == 0 else 0
            for part in YAML_ONLY.split(line[column:]):
                lines.append(part)
                self._starts.append((index, column))
                column += len(part) + 1

    def line(self, number: int) -> str:
        """The loader's line `number` (1-based) without its end; "" past the end."""
        if 1 <= number <= len(self.lines):
            return self.lines[number - 1]
        return ""

    def editor_line(self, line: int) -> str:
        """The protocol's line `line` (0-based, an `lsp.Position`'s) without its end."""
        return self._editor[line] if 0 <= line < len(self._editor) else ""

    def position(self, line: int, column: int) -> lsp.Position:
        """The editor's position of the loader's 1-based (line, code-point column)."""
        return lsp.Position(*self.editor_point(line, column))

    def plain(self, line: int) -> bool:
        """Whether the loader's `line` is the protocol's line `line - 1` and its columns are
        UTF-16 columns plus one (an ASCII line, no other YAML break in the text, no byte
        order mark before it): its positions need no conversion."""
        return (
            self._starts is None
            and not (line == 1 and self._bom)
            and 1 <= line <= len(self.lines)
            and self.lines[line - 1].isascii()
        )

    def editor_point(self, line: int, column: int) -> tuple[int, int]:
        """`position` as (line, character), without making the protocol's object: what
        a feature answering a position for each of many thousand tokens calls."""
        starts = self._starts
        if starts is None and 1 < line <= len(self.lines):  # the common case, inline
            before = self.lines[line - 1][: column - 1] if column > 1 else ""
            return line - 1, len(before) if before.isascii() else utf16_column(before, column)
        if starts is None or not 1 <= line <= len(starts):
            past = 0 if starts is None else len(self._editor) - len(starts)
            character = utf16_column(self.line(line), column)
            if line == 1 and starts is None:
                character += self._bom
            return max(line - 1 + past, 0), character
        index, start = starts[line - 1]
        return index, utf16_column(self._editor[index], start + column)

    def range(self, span: SourceSpan) -> lsp.Range:
        return lsp.Range(
            self.position(span.line, span.column), self.position(span.end_line, span.end_column)
        )

    def point(self, position: lsp.Position) -> Point:
        """The loader's point of an editor's position; a position past the text's end is
        its end, and one past a line's end that line's end (as the protocol reads them)."""
        if position.line >= len(self._editor):
            last = len(self.lines)
            return last, len(self.line(last)) + 1
        column = code_point_column(self._editor[position.line], position.character)
        if self._starts is None:
            return position.line + 1, max(column - self._bom, 1) if position.line == 0 else column
        line = self._first[position.line]
        following = line + 1
        while following < len(self._starts) and self._starts[following] <= (
            position.line,
            column - 1,
        ):
            line, following = following, following + 1
        return line + 1, max(column - self._starts[line][1], 1)  # a cursor before a BOM: 1


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
