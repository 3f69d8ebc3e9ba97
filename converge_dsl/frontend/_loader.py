"""Strict YAML loading: one pass from libyaml nodes to data plus a source map.

PyYAML's C parser composes the node graph (marks included), resolving plain
scalars' implicit tags through a memo (`_StrictLoader`); one recursive walk
then builds the JSON-like data and records, for every JSON path, the marks of
its value and key as plain integers. Nothing keeps the node graph: it is freed
as soon as the walk ends, with the cyclic garbage collector paused
(`paused_gc`), so the tens of thousands of nodes and marks are never scanned.
Locations are materialised lazily from the integers.

Strictness (each problem is a located `Diagnostic`; all of them are raised
together as `PipelineInvalid`): duplicate keys, tabs and syntax errors, tags
outside the core schema, more than one document, non-UTF-8 bytes, characters
YAML forbids (located where they are), `<<` merge keys, alias expansion beyond
`MAX_ALIAS_NODES`, nesting deeper than `MAX_DEPTH`, files over `MAX_BYTES`;
and, through `_scalars`, scalars in keys and values alike: YAML 1.1 traps
(`yes`/`no`/`on`/`off`/`y`/`n`, octal and sexagesimal numbers), non-decimal
numbers (`0x1F`, `0o10`, `1e3`), numbers JSON cannot hold and tags that do not
match their text. Floats whose text is lost (`1.10`) are listed in
`LoadedDocument.inexact` for the schema stage (docs/architecture.md §4).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, format_path
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend._load_problems import (
    character_diagnostic,
    invalid,
    node_span,
    point,
    syntax_diagnostic,
)
from converge_dsl.frontend._marks import Marks, NodeSourceMap
from converge_dsl.frontend._scalars import BOOL, STR, TAG, Problem, read_scalar, text_lost
from converge_dsl.frontend.document import LoadedDocument

MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_ALIAS_NODES = 100_000

_MAP, _SEQ = TAG + "map", TAG + "seq"
_MERGE = TAG + "merge"


def load_file(path: Path, *, display: str | None = None) -> LoadedDocument:
    """Read and strictly load one YAML file; raises `PipelineInvalid`.

    `display` is the file name written into diagnostics (default: `path` as given).
    """
    name = display if display is not None else str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise invalid(
                codes.TOO_LARGE,
                f"file is {size} bytes; the limit is {MAX_BYTES}",
                point(name, 1, 1),
                hint="split the file or shorten it",
            )
        raw = path.read_bytes()
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
    return load_text(text.removeprefix("\ufeff"), name)


def load_text(text: str, file: str) -> LoadedDocument:
    """Strictly load YAML text; `file` names it in diagnostics. Raises `PipelineInvalid`."""
    if len(text) > MAX_BYTES:
        raise invalid(
            codes.TOO_LARGE,
            f"text is {len(text)} characters; the limit is {MAX_BYTES}",
            point(file, 1, 1),
            hint="split the file or shorten it",
        )
    with paused_gc():
        return _load(text, file)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for a burst of allocations (restored after).

    Loading creates tens of thousands of acyclic objects; each collection the
    collector would run meanwhile walks all of them for nothing (a third of
    the time of a cold load of a large file). Nested uses are harmless.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load(text: str, file: str) -> LoadedDocument:
    loader = _StrictLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        raise PipelineInvalid([syntax_diagnostic(exc, file, text)]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        raise PipelineInvalid([character_diagnostic(exc, file, text)]) from None
    except yaml.YAMLError as exc:  # other unmarked errors
        raise invalid(codes.YAML_SYNTAX, str(exc), point(file, 1, 1)) from None
    finally:
        loader.dispose()
    if root is None:
        raise invalid(
            codes.EMPTY_DOCUMENT,
            "the file holds no YAML document",
            point(file, 1, 1),
            hint="a pipeline starts with 'apiVersion: converge-dsl/v1'",
        )
    builder = _Builder(file, loader.resolved)
    data = builder.build(root, ())
    if builder.problems:
        raise PipelineInvalid(builder.problems)
    return LoadedDocument(
        file=file,
        text=text,
        data=data,
        source_map=NodeSourceMap(file, builder.marks),
        inexact=tuple(builder.inexact),
    )


class _StrictLoader(yaml.CSafeLoader):
    """libyaml's composer with PyYAML's core-schema tag resolution, memoised.

    Without path resolvers (none are registered), the tag of a plain scalar
    depends on its text only, and every other node gets its kind's default
    tag, so `resolve` is a pure function: each distinct plain text goes
    through PyYAML's implicit resolvers once per load.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._plain: dict[str, str] = {}

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is ScalarNode:
            if not implicit[0]:
                return STR
            tag = self._plain.get(value)
            if tag is None:
                tag = self._plain[value] = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
            return tag
        return _SEQ if kind is SequenceNode else _MAP

    @property
    def resolved(self) -> dict[str, str]:
        """Plain text -> its implicit tag, for every plain scalar whose tag was resolved.

        A plain scalar whose text is missing here, or maps to another tag,
        had its tag written (`!!null x`).
        """
        return self._plain


class _Builder:
    """Walks the node graph once; collects every problem instead of stopping at the first."""

    __slots__ = ("aliased", "file", "implicit", "inexact", "marks", "problems", "sizes", "stack")

    def __init__(self, file: str, implicit: dict[str, str]) -> None:
        self.file = file
        self.implicit = implicit  # plain text -> the tag it resolved to (`_StrictLoader.resolved`)
        self.inexact: list[tuple[JsonPath, str]] = []  # floats whose text a float drops
        self.marks: dict[JsonPath, Marks] = {}
        self.problems: list[Diagnostic] = []
        self.sizes: dict[int, int] = {}  # id(collection node) -> nodes built under it
        self.stack: set[int] = set()
        self.aliased = 0

    def build(self, node: Node, path: JsonPath, key: Node | None = None) -> Any:
        start, end = node.start_mark, node.end_mark
        style = getattr(node, "style", None)
        if key is None:
            self.marks[path] = (start.line, start.column, end.line, end.column, style)
        else:
            key_start, key_end = key.start_mark, key.end_mark
            self.marks[path] = (
                *(start.line, start.column, end.line, end.column, style),
                *(key_start.line, key_start.column, key_end.line, key_end.column),
            )
        kind = type(node)
        if kind is ScalarNode:
            return self.scalar(node, path)
        if len(path) >= MAX_DEPTH:
            self.fail(
                codes.TOO_DEEP,
                f"nesting deeper than {MAX_DEPTH} levels",
                node,
                path,
                hint="flatten the structure",
            )
            return None
        ident = id(node)
        if ident in self.stack:
            self.fail(
                codes.ALIAS_BUDGET,
                "an alias refers to a node that contains it",
                node,
                path,
                hint="recursive structures cannot be turned into JSON",
            )
            return None
        seen = self.sizes.get(ident)
        if seen is not None:  # a second reference: an alias being expanded
            self.aliased += seen
            if self.aliased > MAX_ALIAS_NODES:
                if self.aliased - seen <= MAX_ALIAS_NODES:
                    self.fail(
                        codes.ALIAS_BUDGET,
                        f"aliases expand to more than {MAX_ALIAS_NODES} nodes",
                        node,
                        path,
                        hint="write the data out instead of nesting aliases",
                    )
                return None
        before = len(self.marks)
        self.stack.add(ident)
        if kind is MappingNode:
            value: Any = self.mapping(node, path)
        elif kind is SequenceNode:
            if node.tag != _SEQ:
                self.forbidden_tag(node, path)
            value = [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
        else:  # pragma: no cover - libyaml yields only the three node kinds
            value = None
        self.stack.discard(ident)
        self.sizes[ident] = len(self.marks) - before + 1
        return value

    def mapping(self, node: Node, path: JsonPath) -> dict[str, Any]:
        if node.tag != _MAP:
            self.forbidden_tag(node, path)
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if type(key_node) is not ScalarNode:
                self.fail(
                    codes.BAD_KEY,
                    "a mapping key must be a plain string, not a collection",
                    key_node,
                    path,
                )
                continue
            if key_node.tag == _MERGE:
                self.fail(
                    codes.BAD_KEY,
                    "merge keys ('<<') are not supported",
                    key_node,
                    path,
                    hint="repeat the keys; merge keys are a YAML 1.1 extension",
                )
                continue
            key = self.scalar(key_node, path, is_key=True)
            if not isinstance(key, str):
                if key_node.tag != BOOL:  # YAML 1.1 booleans were reported by scalar()
                    self.fail(
                        codes.BAD_KEY,
                        f"mapping key {key_node.value!r} is not a string",
                        key_node,
                        path,
                        hint=f"quote it: '{key_node.value}'",
                    )
                continue
            if key in result:
                self.fail(
                    codes.DUPLICATE_KEY,
                    f"duplicate key {key!r} in {format_path(path)}",
                    key_node,
                    path,
                    hint=f"the first {key!r} is on line {first_line[key]}; keep one",
                )
                continue
            first_line[key] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, (*path, key), key_node)
        return result

    def scalar(self, node: Node, path: JsonPath, *, is_key: bool = False) -> Any:
        tag, text, plain = node.tag, node.value, not getattr(node, "style", None)
        if tag == STR and plain:  # the common case: no tag written, no resolver call
            explicit = False
        else:
            explicit = tag != (self.implicit.get(text) if plain else STR)
        value = read_scalar(tag, text, plain=plain, explicit=explicit)
        if type(value) is Problem:
            if value.code == codes.FORBIDDEN_TAG:
                self.forbidden_tag(node, path)
            else:
                self.fail(value.code, value.message, node, path, hint=value.hint)
            return text
        if type(value) is float and not is_key and text_lost(text, value):
            self.inexact.append((path, text))
        return value

    def forbidden_tag(self, node: Node, path: JsonPath) -> None:
        tag = node.tag.replace(TAG, "!!")
        self.fail(
            codes.FORBIDDEN_TAG,
            f"tag {tag!r} is not allowed",
            node,
            path,
            hint="only plain YAML (strings, numbers, true/false, null, lists, mappings) is read",
        )

    def fail(
        self, code: str, message: str, node: Node, path: JsonPath, *, hint: str | None = None
    ) -> None:
        self.problems.append(
            Diagnostic.at(code, message, node_span(self.file, node), path=path, hint=hint)
        )
