"""A loaded YAML document with its source map.

The loader produces a `LoadedDocument`: plain JSON-like data (dicts, lists,
str, int, float, bool, None) plus a `SourceMap` from JSON paths to where each
node sits in the file. Later stages (schema, semantic checks, compiler) look
up locations through the source map; they never re-read the file. `value_at` reads
the value at a JSON path of the data (None where a step is missing). `OTHER_BREAKS`
are YAML's line breaks besides `\n`, `\r\n` and `\r` (NEL, U+2028, U+2029): the one
definition the loader's reload and the language server read.
"""

from __future__ import annotations

import bisect
import string
import threading
from array import array
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity, SourceSpan


class NodeLocation(Record):
    """Where a node is.

    `span` covers the value; `key_span` covers the mapping key that names it
    (None for sequence items and the root). `style` is the scalar style as
    PyYAML reports it: None (plain), `'`, `"`, `|` or `>`; None for
    collections. Block scalars (`|`, `>`) start on the line after `span.line`.
    """

    _fields = ("span", "key_span", "style")
    __slots__ = _fields

    def __init__(
        self, span: SourceSpan, key_span: SourceSpan | None = None, style: str | None = None
    ) -> None:
        self.span = span
        self.key_span = key_span
        self.style = style


class SourceMap:
    """JSON path -> `NodeLocation`, with lookup that falls back to the nearest ancestor."""

    __slots__ = ("_entries", "file")

    def __init__(self, file: str, entries: Mapping[JsonPath, NodeLocation]) -> None:
        self.file = file
        self._entries = dict(entries)

    def get(self, path: JsonPath) -> NodeLocation | None:
        return self._entries.get(tuple(path))

    def locate(self, path: JsonPath) -> NodeLocation:
        """The location of `path`, or of its nearest ancestor that has one."""
        probe = tuple(path)
        while True:
            found = self._entries.get(probe)
            if found is not None:
                return found
            if not probe:
                return NodeLocation(SourceSpan(self.file, 1, 1, 1, 1))
            probe = probe[:-1]

    def span(self, path: JsonPath) -> SourceSpan:
        return self.locate(path).span

    def key_span(self, path: JsonPath) -> SourceSpan:
        """The span of the key naming `path` (falls back to the value's span)."""
        location = self.locate(path)
        return location.key_span or location.span

    def span_at(self, path: JsonPath, *, on_key: bool = False) -> SourceSpan:
        """Where a diagnostic about `path` points: its value, or with `on_key` its key."""
        return self.key_span(path) if on_key else self.span(path)

    def diagnostic(
        self,
        code: str,
        message: str,
        path: JsonPath,
        *,
        hint: str | None = None,
        on_key: bool = False,
        severity: Severity = Severity.ERROR,
    ) -> Diagnostic:
        """A diagnostic about `path`, located at its value (or with `on_key` its key)."""
        span = self.span_at(path, on_key=on_key)
        return Diagnostic.at(code, message, span, path=path, hint=hint, severity=severity)

    def __len__(self) -> int:
        return len(self._entries)


class LoadedDocument(Record):
    """One parsed YAML file: its text (for excerpts), its data, and its source map.

    `inexact` lists the floats whose text a float does not keep (`1.10` read
    as 1.1): (path, text) pairs; the schema stage reports those in free-form data.
    """

    _fields = ("file", "text", "data", "source_map", "inexact")
    # `_alignments` caches `offset_span`'s alignments (no field: not compared, not copied).
    __slots__ = (*_fields, "_alignments")

    def __init__(
        self,
        file: str,
        text: str,
        data: Any,
        source_map: SourceMap,
        inexact: tuple[tuple[JsonPath, str], ...] = (),
    ) -> None:
        self.file = file
        self.text = text
        self.data = data
        self.source_map = source_map
        self.inexact = inexact
        self._alignments: dict[tuple[JsonPath, str], _Alignment | None] = {}

    def line(self, number: int) -> str:
        """Line `number` (1-based) of the text; "" past the end. Cheap to call often."""
        lines = _lines(self.text)
        return lines[number - 1] if 1 <= number <= len(lines) else ""

    def offset_span(self, path: JsonPath, text: str, start: int, end: int) -> SourceSpan | None:
        """The span of `text[start:end]` (`text`: the value of the scalar at `path`), or None.

        A template's text is the scalar's value, not its source: a plain or quoted
        scalar folds its line breaks and indentation, a quoted one has its quotes and
        escapes (`''`, `\\"`, `\\x69`, `\\L`), a block scalar (`|`, `>`) starts on the
        line after its header and loses its indentation. The value is aligned with the
        source, character by character (`_align`); the span is answered when
        `text[start:end]` is found whole on one line, else None: the caller then falls
        back to a line's search. The span covers the source text of each character, so a
        name written `t\\x69ckets` is answered as those ten characters. The alignment is
        made once per (path, text), as far as a call needs it, and kept with the document:
        the calls on one scalar are linear in its length together.
        """
        if not 0 <= start < end <= len(text):
            return None
        aligned = self._aligned(path, text)
        if aligned is None or aligned.upto(end) < end:
            return None
        columns, column = aligned.columns, aligned.columns[start]
        line = aligned.line(start)
        if not column or aligned.line(end - 1) != line:
            return None
        at = column
        for index in range(start, end):
            if columns[index] != at:
                return None
            at += aligned.wide.get(index, 1)
        return SourceSpan(self.file, line, column, line, at)

    def _aligned(self, path: JsonPath, text: str) -> _Alignment | None:
        """The `_Alignment` of the scalar at `path` whose value is `text`, kept with the
        document."""
        try:
            cache = self._alignments
        except AttributeError:  # a `_replace`d copy: its own cache
            cache = self._alignments = {}
        key = (tuple(path), text)
        if key not in cache:
            location = self.source_map.get(path)
            cache[key] = None if location is None else _Alignment(self, location, text)
        return cache[key]

    def text_span(self, path: JsonPath, text: str, start: int, end: int) -> SourceSpan:
        """`text[start:end]` of `text` (the value of the scalar at `path`) in the file:
        aligned with the source (`offset_span`), else found on its line of the value
        (`template_span`, which answers that line's span when it is not on it)."""
        span = self.offset_span(path, text, start, end)
        if span is not None:
            return span
        lineno = text.count("\n", 0, start) + 1
        return self.template_span(path, lineno, text[start:end])

    def joined_span(
        self, path: JsonPath, text: str, start: int, end: int, first_end: int
    ) -> SourceSpan:
        """`text[start:end]`, string literals joined from `start` on whose first ends at
        `first_end`, in the file (`text_span`): the whole when on one line of the file,
        else the first literal, which a caret shows on its line (a folded scalar's line
        breaks are spaces of `text`: only the file tells)."""
        if first_end < end:
            whole = self.offset_span(path, text, start, end)
            if whole is not None:
                return whole
            end = first_end
        return self.text_span(path, text, start, end)

    def template_span(
        self, path: JsonPath, lineno: int | None, needle: str | None = None
    ) -> SourceSpan:
        """Where line `lineno` (1-based, within the template at `path`) sits in the file.

        The span covers that line's text (block scalars start on the line after
        their key); with `needle`, only its first occurrence on that line. The
        front end locates template diagnostics with it, the compiler run-time
        template errors. A scalar over several lines of the file whose value's lines
        are not the file's is read through `_folded_span`: one that folds its line
        breaks (plain, quoted, `>`), and a `|` block holding a U+2028 or U+2029 (a
        line break of the file, a character of the value); so is a double-quoted
        scalar on one line when `needle` is given or its value has a line break, its
        escapes being one character of the value each (`\\n` a line break of the value).
        """
        location = self.source_map.locate(path)
        span = location.span
        folds = span.end_line > span.line and (location.style != "|" or self._keeps_breaks(path))
        if folds or (location.style == '"' and (needle or self._keeps_breaks(path, "\n"))):
            folded = self._folded_span(path, lineno or 1, needle)
            if folded is not None:
                return folded
        lines = _lines(self.text)
        block = location.style in ("|", ">")
        first = span.line + 1 if block else span.line
        line = first + (lineno or 1) - 1
        last = max(span.end_line - 1, first) if block else span.end_line
        if not 1 <= line <= len(lines) or line > last:
            return span
        source = lines[line - 1]
        start = 1 if block or line != span.line else span.column
        end = len(source) + 1 if line != span.end_line else span.end_column
        column = start + len(source[start - 1 :]) - len(source[start - 1 :].lstrip())
        if needle:
            found = source.find(needle, start - 1)
            if found >= 0:
                return SourceSpan(span.file, line, found + 1, line, found + 1 + len(needle))
        return SourceSpan(span.file, line, column, line, max(end, column + 1))

    def _keeps_breaks(self, path: JsonPath, breaks: str | None = None) -> bool:
        """Whether the string at `path` holds one of `breaks` (by default a line break of
        the file its value keeps)."""
        value = value_at(self.data, path)
        return isinstance(value, str) and any(mark in value for mark in breaks or _KEPT)

    def _folded_span(self, path: JsonPath, lineno: int, needle: str | None) -> SourceSpan | None:
        """`template_span` of a scalar whose value's lines are not the file's.

        The value's line `lineno` (or `needle` on it) is aligned with the source
        (`offset_span`): the span of `needle`, else from the line's
        first character to the end of the file's line it is on; None when the
        value is not found or not aligned (the caller then counts lines).
        """
        value = value_at(self.data, path)
        lines = value.split("\n") if isinstance(value, str) else []
        if not 1 <= lineno <= len(lines):
            return None
        start = sum(len(line) + 1 for line in lines[: lineno - 1])
        text = lines[lineno - 1]
        at = text.find(needle) if needle else len(text) - len(text.lstrip())
        if at < 0 or at == len(text):
            return None
        length = len(needle) if needle else 1
        found = self.offset_span(path, value, start + at, start + at + length)
        if found is None or needle:
            return found
        last = self.source_map.locate(path).span
        line = found.line
        end = last.end_column if line == last.end_line else len(self.line(line)) + 1
        return SourceSpan(found.file, line, found.column, line, max(end, found.end_column))


_BLANK = frozenset(" \t\n\r")
# YAML's line breaks besides "\n", "\r\n" and "\r": NEL, LS and PS (YAML 1.1's, which the
# loader reads) each end a line of the file, where the language server's protocol and Jinja
# count none.
OTHER_BREAKS = "\x85\u2028\u2029"
# Those a scalar's value keeps as written where a line of the file ends: not NEL, which the
# value holds as "\n" (PyYAML reads it as one, as it reads "\r\n").
_KEPT = OTHER_BREAKS.replace("\x85", "")


class _Alignment:
    """Where each character of a scalar's value is written: `columns[i]` (1-based) of the
    value's character `i`, 0 where none is, on the source line `line(i)`; `wide` the
    width of those written by an escape of more than one character (`\\x69`, `''`). Made as far
    as asked (`upto`), a line of the source at a time, and resumed from there: a first
    name near the scalar's start costs what it did when each call aligned from the start."""

    __slots__ = ("_lock", "_numbers", "_rest", "_starts", "columns", "wide")

    def __init__(self, document: LoadedDocument, location: NodeLocation, text: str) -> None:
        self.columns = array("i")
        self.wide: dict[int, int] = {}
        self._starts: list[int] = []  # the first character aligned on each source line...
        self._numbers: list[int] = []  # ...and that line's number
        self._rest: Iterator[None] | None = _align(self, document, location, text)
        self._lock = threading.Lock()  # the server's checks run on a thread of their own

    def upto(self, end: int) -> int:
        """Align the value up to its character `end` (or as far as it aligns); how many
        characters are aligned or skipped so far."""
        with self._lock:
            while len(self.columns) < end and self._rest is not None:
                if next(self._rest, _DONE) is _DONE:
                    self._rest = None
        return len(self.columns)

    def line(self, index: int) -> int:
        """The source line the value's character `index` is aligned on (when it is)."""
        return self._numbers[bisect.bisect_right(self._starts, index) - 1]


_DONE = object()


def _align(
    aligned: _Alignment, document: LoadedDocument, location: NodeLocation, text: str
) -> Iterator[None]:
    """Align the value `text` of the scalar at `location` with the source into `aligned`,
    character by character, yielding after each line of the source: a character of the
    value matches the same character of the source, or the whole escape sequence that
    writes it in a quoted scalar; a U+2028 or U+2029 the value keeps matches its source
    line's end; the source's whitespace and quotes in between are skipped, and so is
    whitespace the value has and the source has elsewhere (such a character is aligned
    nowhere). Linear in the scalar's length."""
    place, wide_of = aligned.columns.append, aligned.wide
    span = location.span
    block = location.style in ("|", ">")
    end = len(text)
    index = 0
    for number in range(span.line + 1 if block else span.line, span.end_line + 1):
        source = document.line(number)
        begin = span.column - 1 if number == span.line else 0
        stop = span.end_column - 1 if number == span.end_line else len(source)
        if number == span.line and location.style in ("'", '"'):
            quote = source.find(location.style, begin, stop)
            begin = quote + 1 if quote >= 0 else begin  # past its anchor and tag
        wide: dict[int, int] = {}  # column -> width of an escape on this line
        aligned._starts.append(index)
        aligned._numbers.append(number)
        for column, char in _pieces(source, begin, stop, location.style, wide):
            while index < end and char != text[index] and char not in _BLANK:
                if text[index] not in _BLANK:
                    break  # a quote of the source: skip it
                place(0)  # whitespace the value has and the source has elsewhere
                index += 1
            kept = char == "\n" and index < end and text[index] in _KEPT
            if index < end and (char == text[index] or kept):
                place(column)
                if wide and column in wide:
                    wide_of[index] = wide[column]
                index += 1
            if index == end:
                return
        yield


def scalar_pieces(source: str, style: str | None) -> Iterator[tuple[int, int, str]]:
    """(start, end, character of the value) of each piece of `source`, text of one line of
    a scalar of `style` (`_pieces`): a character, or in a quoted scalar the escape that
    writes one (`\\L`, `''`)."""
    wide: dict[int, int] = {}
    for column, char in _pieces(source, 0, len(source), style, wide):
        if column > len(source):
            return  # the line's end
        yield column - 1, column - 1 + wide.get(column, 1), char


def _pieces(
    source: str, begin: int, stop: int, style: str | None, wide: dict[int, int]
) -> Iterable[tuple[int, str]]:
    """(column, character of the value) of each piece of `source[begin:stop]`, then the
    line's end as a "\\n". A piece is one character, or in a quoted scalar the escape that
    writes one (`\\x69`, `\\L`, `''`), whose width `wide` gets by its column; a `\\`
    ending a double-quoted line escapes the line break (no piece, and no line's end)."""
    mark = {'"': "\\", "'": "'"}.get(style or "")
    if mark is None or source.find(mark, begin, stop) < 0:
        return enumerate(f"{source[begin:stop]}\n", start=begin + 1)
    return _escaped_pieces(source, begin, stop, style, wide)


def _escaped_pieces(
    source: str, begin: int, stop: int, style: str | None, wide: dict[int, int]
) -> Iterator[tuple[int, str]]:
    """`_pieces` of a quoted line holding an escape."""
    at = begin
    while at < stop:
        char, width = source[at], 1
        if style == '"' and char == "\\":
            if at + 1 == stop:
                return  # an escaped line break: the value has nothing for it
            char, width = _escape(source, at + 1, stop)
        elif style == "'" and char == "'" and source[at + 1 : at + 2] == "'":
            width = 2
        if width > 1:
            wide[at + 1] = width
        yield at + 1, char
        at += width
    yield stop + 1, "\n"


def _escape(source: str, at: int, stop: int) -> tuple[str, int]:
    """The character the double-quoted escape whose letter is at `source[at]` writes, and
    the escape's width (its backslash included); a malformed one is its backslash alone
    (the loader refused it)."""
    from converge_dsl._pyyaml import yaml  # its scanner's own tables: what the loader read

    scanner = yaml.scanner.Scanner
    letter = source[at]
    if letter in scanner.ESCAPE_REPLACEMENTS:
        return str(scanner.ESCAPE_REPLACEMENTS[letter]), 2
    digits = int(scanner.ESCAPE_CODES.get(letter, 0))
    code = source[at + 1 : at + 1 + digits]
    if digits and at + digits < stop and all(c in string.hexdigits for c in code):
        return chr(int(code, 16)), 2 + digits
    return "\\", 1


def value_at(data: Any, path: JsonPath) -> Any:
    """The value at `path` in `data`; None where a step is missing."""
    for part in path:
        if isinstance(data, dict) and isinstance(part, str):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data


@lru_cache(maxsize=4)
def _lines(text: str) -> list[str]:
    """`text` split into lines, once per text (many template spans read one file).

    The cache holds the last few texts; a hit costs a hash and an identity
    test (a string caches its hash).
    """
    return text.splitlines()
