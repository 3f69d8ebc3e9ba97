"""`Located`: the base of the manifest's records, each at a JSON path of its document.

The records hold the path and the document's source map and find their
`SourceSpan` only when asked (docs/architecture.md §4).
"""

from __future__ import annotations

from converge_dsl._record import Record
from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend.document import SourceMap

Number = int | float


class Located(Record):
    """A record at a JSON path of a document; `span` is looked up when asked for.

    Equality, hash and repr leave the source map out: two loads of one text
    declare equal records.
    """

    __slots__ = ()
    path: JsonPath
    source_map: SourceMap | None

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._fields if name != "source_map")

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}" for name in self._fields if name != "source_map"
        )
        return f"{self.__class__.__qualname__}({fields})"

    @property
    def span(self) -> SourceSpan | None:
        """Where the record is written (None for a record not read from a document)."""
        return None if self.source_map is None else self.source_map.span(self.path)
