"""Model replies written inline in a test file, compiled as a model script.

`compile_inline(document, spec, path)` checks and compiles the mapping at
`path` of a test file (`rules` and/or `default`, as a model script writes
them) through `models.compile_script`, on a view of the test document whose
source map keeps every node's place in the test file: a problem is located at
its line there, and its message names its full path in the test file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from converge_dsl.diagnostics import Diagnostic, JsonPath, format_path
from converge_dsl.errors import PipelineInvalid

if TYPE_CHECKING:
    from converge_dsl.frontend import LoadedDocument, NodeLocation
    from converge_dsl.models import Script


def compile_inline(document: LoadedDocument, spec: Mapping[str, Any], path: JsonPath) -> Script:
    """The script `spec` (at `path` of `document`) compiled; raises `PipelineInvalid`."""
    from converge_dsl.frontend import LoadedDocument, SourceMap
    from converge_dsl.models import compile_script

    body = {"apiVersion": "converge-dsl/v1", "kind": "ModelScript", **spec}
    entries: dict[JsonPath, NodeLocation] = {}
    for sub in _paths(spec):
        location = document.source_map.get((*path, *sub))
        if location is not None:
            entries[sub] = location
    view = LoadedDocument(document.file, document.text, body, SourceMap(document.file, entries))
    try:
        return compile_script(view)
    except PipelineInvalid as exc:
        raise PipelineInvalid(_within(exc.diagnostics, path)) from None


def _paths(value: Any, prefix: JsonPath = ()) -> Iterator[JsonPath]:
    """Every JSON path inside `value` (itself included)."""
    yield prefix
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _within(diagnostics: Sequence[Diagnostic], prefix: JsonPath) -> list[Diagnostic]:
    """An inline script's diagnostics, their paths made paths of the test file."""
    out = []
    for d in diagnostics:
        path = (*prefix, *d.path)
        message = d.message
        for end in range(len(d.path), 0, -1):  # the message names the path, or a parent of it
            inner = format_path(d.path[:end])
            if inner in message:
                message = message.replace(inner, format_path((*prefix, *d.path[:end])))
                break
        out.append(d._replace(path=path, message=message))
    return out
