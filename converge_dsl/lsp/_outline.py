"""Document symbols and folding ranges, from the loaded document and its source map.

Symbols: one group per section (`keys`, `inputs`, `models`, `seeds`,
`suggestors`, `invariants`), each entry named by its name (a seed by its id,
a suggestor with its kind as detail); in a model script its rules, in a test
file its cases. Folding: every mapping or list that spans more than one line.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend import LoadedDocument
from converge_dsl.lsp._index import name_span
from converge_dsl.lsp._positions import Lines, last_line

SymbolKind = lsp.SymbolKind
_SECTIONS = {
    "keys": (SymbolKind.Field, "name"),
    "inputs": (SymbolKind.Variable, None),
    "models": (SymbolKind.Class, None),
    "seeds": (SymbolKind.Constant, "id"),
    "suggestors": (SymbolKind.Function, "name"),
    "invariants": (SymbolKind.Event, "name"),
    "rules": (SymbolKind.Function, None),
    "cases": (SymbolKind.Method, "name"),
}
_FOLD_DEPTH = 6


def symbols(document: LoadedDocument, lines: Lines) -> list[lsp.DocumentSymbol]:
    """The outline of a pipeline, model script or test file."""
    data = document.data if isinstance(document.data, dict) else {}
    found = []
    for section, (kind, field) in _SECTIONS.items():
        value = data.get(section)
        if not isinstance(value, dict | list) or not value:
            continue
        children = [
            child
            for step, item in _entries(value)
            if (child := _entry(document, lines, (section, step), item, kind=kind, field=field))
        ]
        location = document.source_map.locate((section,))
        found.append(
            lsp.DocumentSymbol(
                name=section,
                kind=SymbolKind.Namespace,
                range=_whole(lines, document, (section,)),
                selection_range=lines.range(location.key_span or location.span),
                children=children,
            )
        )
    return found


def _entries(value: dict[str, Any] | list[Any]) -> list[tuple[str | int, Any]]:
    return list(value.items()) if isinstance(value, dict) else list(enumerate(value))


def _entry(
    document: LoadedDocument,
    lines: Lines,
    path: JsonPath,
    item: Any,
    *,
    kind: lsp.SymbolKind,
    field: str | None,
) -> lsp.DocumentSymbol | None:
    if isinstance(path[-1], str):  # a mapping entry: named by its key
        name, selection = path[-1], name_span(document, path, on_key=True)
    elif field is not None and isinstance(item, dict) and isinstance(item.get(field), str):
        name, selection = item[field], name_span(document, (*path, field))
    elif isinstance(item, dict) and isinstance(item.get("match"), dict):
        name = ", ".join(f"{k}={v}" for k, v in item["match"].items()) or f"rule {path[-1]}"
        selection = document.source_map.span(path)
    else:
        name, selection = f"{path[0]}[{path[-1]}]", document.source_map.span(path)
    detail = item.get("kind") or item.get("adapter") if isinstance(item, dict) else None
    return lsp.DocumentSymbol(
        name=str(name),
        kind=kind,
        detail=str(detail) if detail else None,
        range=_whole(lines, document, path),
        selection_range=lines.range(selection),
    )


def _whole(lines: Lines, document: LoadedDocument, path: JsonPath) -> lsp.Range:
    """The range of an entry, its key included (a symbol's range holds its selection)."""
    location = document.source_map.locate(path)
    start = location.key_span or location.span
    end = location.span
    return lsp.Range(
        lines.position(start.line, start.column), lines.position(end.end_line, end.end_column)
    )


def folding(document: LoadedDocument) -> list[lsp.FoldingRange]:
    """A folding range for each collection spanning several lines."""
    found: list[lsp.FoldingRange] = []
    _fold(document, document.data, (), found)
    return found


def _fold(
    document: LoadedDocument, value: Any, path: JsonPath, found: list[lsp.FoldingRange]
) -> None:
    if not isinstance(value, dict | list) or len(path) > _FOLD_DEPTH:
        return
    if path:
        location = document.source_map.locate(path)
        start = (location.key_span or location.span).line
        end = last_line(document, location.span)
        if end > start:
            found.append(lsp.FoldingRange(start_line=start - 1, end_line=end - 1))
    for step, item in _entries(value):
        _fold(document, item, (*path, step), found)
