"""Reading a JSON Schema at a JSON path: which subschemas apply there, their keys and values.

What completion and hover need from the pipeline schema (and a key's or an
output's data schema): the subschemas that apply at a path, with `$ref`s
resolved within the document, `allOf` merged, every `anyOf`/`oneOf` branch
kept, and an `if`/`then` taken when the data there matches its `if` (the
pipeline schema picks a suggestor's branch by its `kind` that way). This is
a reader for editing help, not a validator: validation is the schema
stage's (`frontend.schema_diagnostics`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from converge_dsl._json_pointer import unescape
from converge_dsl.diagnostics import JsonPath

Schema = Mapping[str, Any]


class SchemaAt:
    """The subschemas that apply at one path, and the `$defs` names reached through."""

    __slots__ = ("definitions", "schemas")

    def __init__(self, schemas: list[Schema], definitions: set[str]) -> None:
        self.schemas = schemas
        self.definitions = definitions

    def properties(self) -> dict[str, Schema]:
        """Every named property of the applying subschemas (first seen wins)."""
        found: dict[str, Schema] = {}
        for schema in self.schemas:
            for name, sub in (schema.get("properties") or {}).items():
                if isinstance(sub, dict):
                    found.setdefault(name, sub)
        return found

    def description(self) -> str | None:
        for schema in self.schemas:
            text = schema.get("description")
            if isinstance(text, str):
                return text
        return None

    def values(self) -> list[object]:
        """The values an `enum` or `const` allows here, and `true`/`false` for a boolean."""
        found: list[object] = []
        for schema in self.schemas:
            if "const" in schema:
                found.append(schema["const"])
            found.extend(schema.get("enum") or ())
            if schema.get("type") == "boolean":
                found.extend((True, False))
        return list(dict.fromkeys(found))


def at(root: Schema, path: JsonPath, data: Any) -> SchemaAt:
    """The subschemas of `root` applying at `path` of `data` (the document's data)."""
    definitions: set[str] = set()
    current = list(_expand(root, root, data, definitions, 0))
    value = data
    for step in path:
        value = _step(value, step)
        found: list[Schema] = []
        for schema in current:
            found.extend(_children(schema, step))
        definitions = set()
        current = [s for sub in found for s in _expand(root, sub, value, definitions, 0)]
    return SchemaAt(current, definitions)


def _step(value: Any, step: str | int) -> Any:
    if isinstance(value, dict) and isinstance(step, str):
        return value.get(step)
    if isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
        return value[step]
    return None


def _children(schema: Schema, step: str | int) -> Iterator[Schema]:
    if isinstance(step, str):
        properties = schema.get("properties") or {}
        if step in properties:
            yield properties[step]
            return
        yield from (schema.get("patternProperties") or {}).values()
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            yield extra
        return
    prefix = schema.get("prefixItems") or []
    if step < len(prefix):
        yield prefix[step]
    elif isinstance(schema.get("items"), dict):
        yield schema["items"]


def _expand(
    root: Schema, schema: Any, value: Any, definitions: set[str], depth: int
) -> Iterator[Schema]:
    """`schema` and what it applies through `$ref`, `allOf`, `anyOf`, `oneOf` and `if`
    (its `then` where the value meets it, else its `else`)."""
    if not isinstance(schema, dict) or depth > 32:
        return
    yield schema
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/"):
        definitions.add(reference.rsplit("/", 1)[-1])
        yield from _expand(root, _resolve(root, reference), value, definitions, depth + 1)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for branch in schema.get(keyword) or ():
            yield from _expand(root, branch, value, definitions, depth + 1)
    condition = schema.get("if")
    if isinstance(condition, dict):
        branch = "then" if matches(condition, value) else "else"
        yield from _expand(root, schema.get(branch), value, definitions, depth + 1)


def expand(root: Schema, schema: Any, value: Any = None) -> Iterator[Schema]:
    """`schema` and every subschema it applies to `value` (`$ref`, `allOf`, ..., `if`)."""
    return _expand(root, schema, value, set(), 0)


def _resolve(root: Schema, reference: str) -> Any:
    node: Any = root
    for part in reference[2:].split("/"):
        if not isinstance(node, dict):
            return None
        node = node.get(unescape(part))
    return node


def matches(condition: Schema, value: Any) -> bool:
    """Whether `value` meets an `if` of a `const`/`enum`, or of `const`/`enum` properties
    (what the pipeline schema's branches test); any other `if` is taken as met, so every
    branch is offered."""
    if "const" in condition:
        return bool(value == condition["const"])
    if "enum" in condition:
        return value in condition["enum"]
    if not isinstance(value, dict):
        return False
    if any(name not in value for name in condition.get("required") or ()):
        return False
    for name, sub in (condition.get("properties") or {}).items():
        if not isinstance(sub, dict) or name not in value:
            continue
        if "const" in sub and value[name] != sub["const"]:
            return False
        if "enum" in sub and value[name] not in sub["enum"]:
            return False
    return True


def data_fields(schema: Any) -> dict[str, Schema]:
    """The fields of the objects a data schema describes (an array's items' fields too)."""
    if not isinstance(schema, dict):
        return {}
    found = at(schema, (), None)
    fields = found.properties()
    for sub in found.schemas:
        if sub.get("type") == "array" or "items" in sub:
            fields = {**fields, **data_fields(sub.get("items"))}
    return fields
