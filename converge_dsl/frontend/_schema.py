"""JSON Schema validation with located, readable diagnostics.

`schema_diagnostics(doc, "pipeline.v1.json")` validates a loaded document
with jsonschema-rs (compiled once per process) and translates each error into
a `Diagnostic` at the offending key or value: unknown keys get "did you mean"
from the schema's own property names, enum misses from the allowed values,
and a number where text was expected gets the YAML 1.1 "quote it" hint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from converge_dsl import codes
from converge_dsl._resources import read_schema_text
from converge_dsl.diagnostics import Diagnostic, JsonPath, did_you_mean, format_path
from converge_dsl.frontend.document import LoadedDocument

_JSON_TYPES = {
    dict: "a mapping",
    list: "a list",
    str: "text",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "text",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "null": "null",
}
_RANGE = {"Minimum": ">=", "Maximum": "<=", "ExclusiveMinimum": ">", "ExclusiveMaximum": "<"}
_SIZE = frozenset(
    {
        "MinItems",
        "MaxItems",
        "UniqueItems",
        "MinLength",
        "MaxLength",
        "MinProperties",
        "MaxProperties",
    }
)


@lru_cache(maxsize=8)
def load_schema(name: str) -> dict[str, Any]:
    """The parsed schema `schemas/<name>` (cached)."""
    schema: dict[str, Any] = json.loads(read_schema_text(name))
    return schema


@lru_cache(maxsize=8)
def _validator(name: str) -> Any:
    import jsonschema_rs

    return jsonschema_rs.validator_for(load_schema(name))


def schema_diagnostics(doc: LoadedDocument, schema_name: str) -> list[Diagnostic]:
    """Every schema violation of `doc` against `schemas/<schema_name>`, located."""
    validator = _validator(schema_name)
    if validator.is_valid(doc.data):
        return []
    schema = load_schema(schema_name)
    seen: set[tuple[str, int, int, str]] = set()
    out: list[Diagnostic] = []
    for error in validator.iter_errors(doc.data):
        for diagnostic in _translate(error, doc, schema):
            marker = (diagnostic.code, diagnostic.line, diagnostic.column, diagnostic.message)
            if marker not in seen:
                seen.add(marker)
                out.append(diagnostic)
    return out


def _subschema(schema: dict[str, Any], schema_path: Iterable[str | int]) -> Any:
    node: Any = schema
    for part in schema_path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return {}
    return node


def _value_at(data: Any, path: JsonPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _translate(error: Any, doc: LoadedDocument, schema: dict[str, Any]) -> Iterable[Diagnostic]:
    path: JsonPath = tuple(error.instance_path)
    schema_path = list(error.schema_path)
    parent = _subschema(schema, schema_path[:-1])
    description = parent.get("description") if isinstance(parent, dict) else None
    kind = type(error.kind).__name__
    where = format_path(path)
    smap = doc.source_map
    value = _value_at(doc.data, path)

    def at(
        code: str, message: str, target: JsonPath, *, hint: str | None = None, on_key: bool = False
    ) -> Diagnostic:
        span = smap.key_span(target) if on_key else smap.span(target)
        return Diagnostic.at(code, message, span, path=target, hint=hint)

    if kind == "AdditionalProperties":
        allowed = sorted(parent.get("properties", {})) if isinstance(parent, dict) else []
        for key in error.kind.unexpected:
            guess = did_you_mean(key, allowed)
            hint = (
                f"did you mean {guess!r}?"
                if guess
                else (f"allowed keys here: {', '.join(allowed)}" if allowed else None)
            )
            yield at(
                codes.UNKNOWN_FIELD,
                f"unknown key {key!r} in {where}",
                (*path, key),
                hint=hint,
                on_key=True,
            )
        return
    if kind == "Required":
        prop = error.kind.property
        hint = _describe(schema, [*schema_path[:-1], "properties", prop])
        yield at(
            codes.MISSING_FIELD,
            f"missing required key {prop!r} in {where}",
            path,
            hint=hint,
            on_key=True,
        )
        return
    if kind == "Type":
        wanted = " or ".join(_TYPE_WORDS.get(t, t) for t in _types(error.kind))
        found = _JSON_TYPES.get(type(value), type(value).__name__)
        location = smap.locate(path)
        if "text" in wanted and isinstance(value, int | float | bool) and location.style is None:
            raw = (
                doc.text.splitlines()[location.span.line - 1][
                    location.span.column - 1 : location.span.end_column - 1
                ]
                if location.span.line == location.span.end_line
                else str(value)
            )
            yield at(
                codes.VERSION_AS_NUMBER,
                f"{where}: YAML reads {raw!r} as {found} ({_show(value)}), text was expected",
                path,
                hint=f'quote it: "{raw}"',
            )
            return
        yield at(codes.WRONG_TYPE, f"{where} must be {wanted}, not {found}", path, hint=description)
        return
    if kind in ("Enum", "Constant"):
        options = list(error.kind.options) if kind == "Enum" else [error.kind.expected_value]
        words = [str(o) for o in options]
        guess = did_you_mean(str(value), words) if isinstance(value, str) else None
        hint = f"did you mean {guess!r}?" if guess else f"allowed: {', '.join(words)}"
        yield at(
            codes.NOT_ALLOWED_VALUE, f"{where}: {_show(value)} is not allowed", path, hint=hint
        )
        return
    if kind == "Pattern":
        yield at(
            codes.BAD_FORMAT, f"{where}: {_show(value)} has the wrong form", path, hint=description
        )
        return
    if kind == "PropertyNames":
        yield from _property_names(error, doc, path, schema, schema_path)
        return
    if kind in _RANGE:
        limit = error.kind.limit
        yield at(
            codes.OUT_OF_RANGE,
            f"{where} must be {_RANGE[kind]} {limit}, not {_show(value)}",
            path,
            hint=description,
        )
        return
    if kind in _SIZE:
        yield at(
            codes.BAD_SIZE, f"{where}: {_first_sentence(error.message)}", path, hint=description
        )
        return
    yield at(
        codes.SCHEMA_OTHER,
        f"{where}: {_show(value)} is not valid here",
        path,
        hint=description or _first_sentence(error.message),
    )


def _types(kind: Any) -> list[str]:
    types = getattr(kind, "types", None) or []
    return [str(t).lower().rsplit(".", 1)[-1] for t in types]


def _describe(schema: dict[str, Any], schema_path: list[str | int]) -> str | None:
    node = _subschema(schema, schema_path)
    if isinstance(node, dict) and "$ref" in node:
        node = _subschema(schema, node["$ref"].removeprefix("#/").split("/")) | node
    description = node.get("description") if isinstance(node, dict) else None
    return str(description) if description else None


def _property_names(
    error: Any,
    doc: LoadedDocument,
    path: JsonPath,
    schema: dict[str, Any],
    schema_path: list[str | int],
) -> Iterable[Diagnostic]:
    value = _value_at(doc.data, path)
    names = _subschema(schema, schema_path)
    pattern = names.get("pattern") if isinstance(names, dict) else None
    import re

    for key in value if isinstance(value, dict) else ():
        if pattern is None or not re.search(pattern, key):
            span = doc.source_map.key_span((*path, key))
            yield Diagnostic.at(
                codes.BAD_FORMAT,
                f"{format_path(path)}: name {key!r} has the wrong form",
                span,
                path=(*path, key),
                hint=f"names must match {pattern}" if pattern else None,
            )


def _first_sentence(message: str) -> str:
    return message.split("\n", 1)[0]
