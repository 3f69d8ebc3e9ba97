"""A source map built from recorded YAML marks, materialised lazily.

The loader records, for every JSON path, the marks of its value (and key) as
plain integers (`Marks`); `NodeSourceMap` turns a path's marks into a
`NodeLocation` only when a diagnostic asks for it.
"""

from __future__ import annotations

from typing import Any

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend.document import NodeLocation, SourceMap

# (line, column, end line, end column, style[, key line, key column, key end line, key end
# column]), 0-based as PyYAML marks are: plain data the garbage collector soon stops tracking.
Marks = tuple[Any, ...]


def _span(file: str, marks: Marks, at: int) -> SourceSpan:
    line, column, end_line, end_column = marks[at : at + 4]
    return SourceSpan(file, line + 1, column + 1, end_line + 1, end_column + 1)


class _LazyEntries(dict[JsonPath, NodeLocation]):
    """Converts a path's recorded marks into a `NodeLocation` on first lookup."""

    def __init__(self, file: str, marks: dict[JsonPath, Marks]) -> None:
        super().__init__()
        self._file = file
        self._marks = marks

    def get(self, path: JsonPath, default: Any = None) -> Any:
        found = super().get(path)
        if found is not None:
            return found
        marks = self._marks.get(path)
        if marks is None:
            return default
        location = NodeLocation(
            span=_span(self._file, marks, 0),
            key_span=_span(self._file, marks, 5) if len(marks) > 5 else None,
            style=marks[4] or None,
        )
        self[path] = location
        return location

    def __len__(self) -> int:
        return len(self._marks)


class NodeSourceMap(SourceMap):
    """A `SourceMap` whose entries are materialised on demand."""

    __slots__ = ()

    def __init__(self, file: str, marks: dict[JsonPath, Marks]) -> None:
        self.file = file
        self._entries = _LazyEntries(file, marks)
