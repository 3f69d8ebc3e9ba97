"""Where a stretch of a scalar's value sits in the file: template offsets through the source map.

A template's text is the scalar's value, not its source: a plain or quoted
scalar folds its line breaks and indentation, a quoted one has its quotes and
escapes (`''`, `\\"`), a block scalar (`|`, `>`) starts on the line after its
header and loses its indentation. `offset_span(doc, path, text, start, end)`
aligns the value with the source, character by character (a character of the
value matches the same character of the source; the source's whitespace,
quotes and escape characters in between are skipped), and answers the span of
`text[start:end]` when it is found whole on one line, else None: the caller
then falls back to a line's search. Linear in the scalar's length, and run only
for a finding.
"""

from __future__ import annotations

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend.document import LoadedDocument

_BLANK = frozenset(" \t\n\r")


def offset_span(
    doc: LoadedDocument, path: JsonPath, text: str, start: int, end: int
) -> SourceSpan | None:
    """The span of `text[start:end]` (`text`: the value of the scalar at `path`), or None."""
    location = doc.source_map.get(path)
    if location is None or not 0 <= start < end <= len(text):
        return None
    span = location.span
    block = location.style in ("|", ">")
    found: list[tuple[int, int]] = []  # (line, column) of text[start], text[start + 1], ...
    index = 0
    for number in range(span.line + 1 if block else span.line, span.end_line + 1):
        source = doc.line(number)
        begin = span.column - 1 if number == span.line else 0
        stop = span.end_column - 1 if number == span.end_line else len(source)
        for column, char in enumerate(f"{source[begin:stop]}\n", start=begin + 1):
            while index < end and char != text[index] and char not in _BLANK:
                if text[index] not in _BLANK:
                    break  # a quote or an escape of the source: skip it
                index += 1  # whitespace the value has and the source has elsewhere
            if index < end and char == text[index]:
                if index >= start:
                    found.append((number, column))
                index += 1
            if index == end:
                return _whole(doc.file, found, end - start)
    return None


def _whole(file: str, found: list[tuple[int, int]], length: int) -> SourceSpan | None:
    """The span of the matched characters when they are `length` adjacent ones on one line."""
    if len(found) != length:
        return None
    (line, column), (last_line, last_column) = found[0], found[-1]
    if last_line != line or last_column - column != length - 1:
        return None
    return SourceSpan(file, line, column, line, last_column + 1)
