"""Strict YAML loading: one pass from libyaml's events to data plus a source map.

PyYAML's C parser yields the document as a stream of events; `_build` turns
them into the JSON-like data and a compact `MarkTree` of the marks (numbers in
flat arrays, no JSON path stored), without composing PyYAML's node graph.
Locations are materialised lazily (`_marks.NodeSourceMap`).

Strictness (each problem is a located `Diagnostic`; all of them are raised
together as `PipelineInvalid`): duplicate keys, tabs and syntax errors, tags
outside the core schema, more than one document, non-UTF-8 bytes, characters
YAML forbids (located where they are), `<<` merge keys, alias expansion beyond
`MAX_ALIAS_NODES`, nesting deeper than `MAX_DEPTH`, files over `max_bytes()`
(`MAX_BYTES` unless `CONVERGE_DSL_MAX_FILE_BYTES` says otherwise);
and, through `_scalars`, scalars in keys and values alike: YAML 1.1 traps
(`yes`/`no`/`on`/`off`/`y`/`n`, octal and sexagesimal numbers), non-decimal
numbers (`0x1F`, `0o10`, `1e3`), numbers JSON cannot hold and tags that do not
match their text. Floats whose text is lost (`1.10`) are listed in
`LoadedDocument.inexact` for the schema stage (docs/architecture.md §4).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._pyyaml import yaml
from converge_dsl._reading import ReadRefused, read_bytes
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend._anchors import MAX_ALIAS_NODES, MAX_DEPTH
from converge_dsl.frontend._build import Builder, untagged_texts
from converge_dsl.frontend._load_problems import (
    character_diagnostic,
    invalid,
    point,
    syntax_diagnostic,
)
from converge_dsl.frontend._marks import NodeSourceMap
from converge_dsl.frontend.document import LoadedDocument

MAX_BYTES = 8 * 1024 * 1024
# The environment variable that sets the file-size cap (docs/reference.md, "Environment").
MAX_BYTES_VARIABLE = "CONVERGE_DSL_MAX_FILE_BYTES"
_TOO_LARGE_HINT = f"split the file or shorten it, or raise the limit with {MAX_BYTES_VARIABLE}=N"

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_BYTES",
    "MAX_BYTES_VARIABLE",
    "MAX_DEPTH",
    "load_file",
    "load_text",
    "max_bytes",
]


def max_bytes(env: Mapping[str, str] | None = None) -> int:
    """The size cap of a loaded file: `CONVERGE_DSL_MAX_FILE_BYTES` of `env` (default: the
    process's environment) when set, else `MAX_BYTES`. A value that is not a positive
    whole number is a `UsageError`."""
    raw = (os.environ if env is None else env).get(MAX_BYTES_VARIABLE, "").strip()
    if not raw:
        return MAX_BYTES
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(
            f"{MAX_BYTES_VARIABLE}={raw!r} is not a positive whole number of bytes",
            hint=f"e.g. {MAX_BYTES_VARIABLE}={2 * MAX_BYTES}, or unset it for {MAX_BYTES}",
            code=codes.ARGUMENTS_REFUSED,
        )
    return int(raw)


def load_file(
    path: Path, *, display: str | None = None, env: Mapping[str, str] | None = None
) -> LoadedDocument:
    """Read and strictly load one YAML file; raises `PipelineInvalid`.

    `display` is the file name written into diagnostics (default: `path` as given);
    `env` is the environment whose `CONVERGE_DSL_MAX_FILE_BYTES` caps it (`max_bytes`).
    """
    name = display if display is not None else str(path)
    limit = max_bytes(env)
    try:
        size = path.stat().st_size
        if size > limit:
            raise invalid(
                codes.TOO_LARGE,
                f"file is {size} bytes; the limit is {limit}",
                point(name, 1, 1),
                hint=_TOO_LARGE_HINT,
            )
        raw = read_bytes(path, "file", cap=limit)
    except ReadRefused as exc:
        raise invalid(exc.code, exc.reason, point(name, 1, 1)) from None
    except OSError as exc:
        raise invalid(
            codes.UNREADABLE, f"cannot read file: {exc.strerror or exc}", point(name, 1, 1)
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise invalid(
            codes.NOT_UTF8,
            f"byte 0x{raw[exc.start]:02x} is not valid UTF-8",
            point(name, line, column),
            hint="save the file as UTF-8",
        ) from None
    return load_text(text.removeprefix("\ufeff"), name, env=env)


def load_text(
    text: str,
    file: str,
    *,
    previous: LoadedDocument | None = None,
    env: Mapping[str, str] | None = None,
) -> LoadedDocument:
    """Strictly load YAML text; `file` names it in diagnostics. Raises `PipelineInvalid`.

    `previous`, a document loaded before from another text of the same file (an
    editor's earlier text), lets the load re-use the entries whose text did not
    change (`_reload`); the result is the same document a load without it makes.
    `env` is the environment whose `CONVERGE_DSL_MAX_FILE_BYTES` caps it (`max_bytes`).
    """
    limit = max_bytes(env)
    if len(text) > limit:
        raise invalid(
            codes.TOO_LARGE,
            f"text is {len(text)} characters; the limit is {limit}",
            point(file, 1, 1),
            hint=_TOO_LARGE_HINT,
        )
    if previous is not None and previous.file == file:
        from converge_dsl.frontend._reload import reload

        document = reload(previous, text)
        if document is not None:
            return document
    return _load(text, file)


def _load(text: str, file: str) -> LoadedDocument:
    try:
        data, builder = _build(text, file, None)
        if builder.needs_all_texts:  # a tag's meaning depends on texts further on
            data, builder = _build(text, file, _untagged_texts(text))
    except yaml.MarkedYAMLError as exc:
        raise PipelineInvalid([syntax_diagnostic(exc, file, text)]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        raise PipelineInvalid([character_diagnostic(exc, file, text)]) from None
    except yaml.YAMLError as exc:  # other unmarked errors
        raise invalid(codes.YAML_SYNTAX, str(exc), point(file, 1, 1)) from None
    if builder.problems:
        raise PipelineInvalid(builder.diagnostics())
    builder.tree.plain = builder.plain_only
    return LoadedDocument(
        file=file,
        text=text,
        data=data,
        source_map=NodeSourceMap(file, builder.tree, builder.paths),
        inexact=tuple(builder.inexact),
    )


def _build(text: str, file: str, plain: dict[str, str] | None) -> tuple[Any, Builder]:
    """The document's data and the builder that holds the rest (`Builder`), in one pass."""
    parser = yaml._yaml.CParser(text)
    try:
        builder = Builder(parser, file, plain)
        return _document(parser, builder), builder
    finally:
        parser.dispose()


def _untagged_texts(text: str) -> dict[str, str]:
    parser = yaml._yaml.CParser(text)
    try:
        return untagged_texts(parser)
    finally:
        parser.dispose()


def _document(parser: Any, builder: Builder) -> Any:
    """The data of the stream's single document, built from its events."""
    parser.get_event()  # the stream's start
    event = parser.get_event()
    if isinstance(event, yaml.events.StreamEndEvent):
        raise invalid(
            codes.EMPTY_DOCUMENT,
            "the file holds no YAML document",
            point(builder.file, 1, 1),
            hint="a pipeline starts with 'apiVersion: converge-dsl/v1'",
        )
    event = parser.get_event()  # the document's start: now its root node
    start = event.start_mark
    data = builder.build(event)
    parser.get_event()  # the document's end
    event = parser.get_event()
    if not isinstance(event, yaml.events.StreamEndEvent):
        raise yaml.composer.ComposerError(
            "expected a single document in the stream",
            start,
            "but found another document",
            event.start_mark,
        )
    return data
