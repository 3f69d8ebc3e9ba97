"""`resolve(root, ref)`: the node a local JSON reference (`#`, `#/a/b`) names; `unescape`
a part of a pointer;
`pointer(parts)` and `error_pointer(error)`: the JSON pointer of a path, and of what a
JSON Schema error is about.

The one walker for the `$ref`s of key schemas (`frontend`) and of pack input
schemas (`pack info`'s outline): RFC 6901 escapes (`~1` is `/`, `~0` is `~`),
list indexes as digits, and None, never an exception, for anything that does
not resolve (a remote reference, a missing member, an index past the end).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def unescape(part: str) -> str:
    """A pointer's part as written, RFC 6901 escapes undone (`~1` is `/`, `~0` is `~`)."""
    return part.replace("~1", "/").replace("~0", "~")


def resolve(root: Any, ref: str) -> Any:
    """The node `ref` names inside `root`, or None when it names nothing there."""
    if not ref.startswith("#"):
        return None
    node = root
    for raw in filter(None, ref[1:].split("/")):
        part = unescape(raw)
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def pointer(parts: Iterable[object]) -> str:
    """The RFC 6901 pointer of the path `parts` (`""` is the whole document)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def error_pointer(error: Any) -> str:
    """The pointer of what a python-jsonschema `error` is about: where it was found;
    for a missing `required` property, that property's place; for a property
    `additionalProperties: false` refuses (no `patternProperties` beside it), that one."""
    path = list(error.absolute_path)
    instance, schema = error.instance, error.schema
    if not isinstance(instance, Mapping) or not isinstance(schema, Mapping):
        return pointer(path)
    if error.validator == "required":
        path.extend([n for n in error.validator_value if n not in instance][:1])
    elif error.validator == "additionalProperties" and "patternProperties" not in schema:
        known = schema.get("properties", {})
        path.extend([n for n in instance if n not in known][:1])
    return pointer(path)
