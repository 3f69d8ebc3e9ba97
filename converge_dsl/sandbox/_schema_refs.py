"""The references of a schema a pipeline or pack supplies, for validate to report.

`schema_parts` is the one walker of a schema: it tells the keywords whose
values are schemas (`items`, `not`, `allOf`...) from the maps of names to
schemas (`properties`, `patternProperties`, `$defs`, `definitions`,
`dependentSchemas`, `dependencies`) and from data (`enum`, `const`,
`examples`, `default`, and every other keyword), so a property named `$ref`,
`default`, `enum` or `$id` is a name, never a keyword. It is lazy and linear
in the schema whatever its depth (a part's place is a `Trail`, made a path by
`path_of` only where one is needed), so the size limits stop it early;
`schema_objects` is its schema objects with their paths.
`remote_refs` finds every reference that does not start with `#` (resolved
nowhere: nothing is read from disk or the network); `dangling_refs` every
local one that names nothing in the schema (a pointer to no member, an anchor
no subschema declares), with the definition it likely meant; `misplaced_refs`
every local pointer to a value that is not a schema (what a validator would
apply unchecked).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import unquote

from converge_dsl._json_pointer import pointer, resolve, unescape

Path = tuple[str | int, ...]

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
ANCHOR_KEYWORDS = ("$anchor", "$dynamicAnchor")
DATA_KEYWORDS = frozenset(("enum", "const", "examples", "default"))  # values, not subschemas
SCHEMA_KEYWORDS = frozenset(
    (
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    )
)  # a schema (`items` also a list of schemas, before 2020-12)
SCHEMA_LISTS = frozenset(("allOf", "anyOf", "oneOf", "prefixItems"))
SCHEMA_MAPS = frozenset(
    ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
)  # name -> schema (`dependencies` also name -> list of names)


def embedded_resource(node: Mapping[str, Any]) -> bool:
    """Whether `node`, a subschema, starts a resource of its own: its `$id` is a URI,
    not a plain-name anchor (`#name`, drafts 6 and 7)."""
    ident = node.get("$id")
    return isinstance(ident, str) and not ident.startswith("#")


def anchors_of(node: Mapping[str, Any]) -> Iterator[str]:
    """The anchor names schema object `node` declares: `$anchor`, `$dynamicAnchor`,
    and a plain-name `$id` (`#name`)."""
    for word in ANCHOR_KEYWORDS:
        if isinstance(node.get(word), str):
            yield node[word]
    ident = node.get("$id")
    if isinstance(ident, str) and ident.startswith("#") and len(ident) > 1:
        yield ident[1:]


# The roles of a keyword's value (`keyword_role`, `schema_parts`).
Role = Literal["schema", "schemas", "data"]
SCHEMA: Role = "schema"
SCHEMAS: Role = "schemas"
DATA: Role = "data"
# The place of a part: (its container's trail, its key or index); None for the walk's start.
Trail = tuple["Trail", str | int] | None


def path_of(trail: Trail, base: Path = ()) -> Path:
    """The path, from `base`, of the part at `trail`."""
    parts: list[str | int] = []
    while trail is not None:
        trail, key = trail
        parts.append(key)
    return (*base, *reversed(parts))


def keyword_role(key: str, value: Any) -> Role:
    """The role of `value` under keyword `key` of a schema object: a schema (`items`,
    `not`...), `schemas` (a keyword's list or map of schemas: `allOf`, `properties`,
    `items` written as a list), or data (any other keyword, or a value of the wrong
    shape for its keyword, which no validator reads as schemas)."""
    if key in SCHEMA_KEYWORDS:
        return SCHEMAS if isinstance(value, list | tuple) else SCHEMA
    if key in SCHEMA_LISTS and isinstance(value, list | tuple):
        return SCHEMAS
    if key in SCHEMA_MAPS and isinstance(value, Mapping):
        return SCHEMAS
    return DATA


def schema_parts(schema: Any, *, resources: bool = True) -> Iterator[tuple[Any, Trail, Role]]:
    """Every part of `schema` once, with its trail and role: `SCHEMA` for what stands
    where a schema goes (an object, a boolean, or whatever is written there), `SCHEMAS`
    for a keyword's list or map of schemas, `DATA` for any other keyword's value,
    yielded whole and not walked. A part is yielded before its own parts are listed,
    so a consumer that stops on a wide part does not pay for its width. With
    `resources` False, nothing inside a nested resource (`embedded_resource`)."""
    stack: list[tuple[Any, Trail, Role]] = [(schema, None, SCHEMA)]
    while stack:
        node, trail, role = stack.pop()
        if role == SCHEMA and isinstance(node, Mapping):
            if not resources and trail is not None and embedded_resource(node):
                continue
            yield node, trail, role
            stack.extend(
                (value, (trail, key), keyword_role(key, value)) for key, value in node.items()
            )
        elif role == SCHEMAS:
            yield node, trail, role
            members = node.items() if isinstance(node, Mapping) else enumerate(node)
            stack.extend((value, (trail, key), SCHEMA) for key, value in members)
        else:
            yield node, trail, role


def schema_objects(
    schema: Any, path: Path = (), *, resources: bool = True
) -> Iterator[tuple[Mapping[str, Any], Path]]:
    """Every schema object in `schema` (itself first) with its path (from `path`,
    `schema`'s own); with `resources` False, none inside a nested resource
    (`embedded_resource`)."""
    for node, trail, role in schema_parts(schema, resources=resources):
        if role == SCHEMA and isinstance(node, Mapping):
            yield node, path_of(trail, path)


def remote_refs(schema: Any, path: Path = ()) -> list[Path]:
    """Paths (inside `schema`) of every `$ref`-like keyword that does not start with `#`."""
    found = [
        (*where, key)
        for node, where in schema_objects(schema, path)
        for key in REF_KEYWORDS
        if isinstance(node.get(key), str) and not node[key].startswith("#")
    ]
    return sorted(found, key=lambda p: [str(x) for x in p])


def dangling_refs(schema: Any) -> list[tuple[Path, str | None]]:
    """(path, guess) of every local reference in `schema` that names nothing in it: a
    pointer (`#/$defs/x`) to no member, or an anchor (`#x`) no `$anchor`,
    `$dynamicAnchor` or plain-name `$id` declares; `guess` is the existing
    `#/$defs/NAME` (or `definitions`) it likely meant. References under a nested
    `$id` resolve against that subschema and are left to the validator."""
    anchors: set[str] = set()
    refs: list[tuple[Path, str]] = []
    for node, where in schema_objects(schema, resources=False):
        anchors.update(anchors_of(node))
        for key in REF_KEYWORDS:
            value = node.get(key)
            if isinstance(value, str) and value.startswith("#"):
                refs.append(((*where, key), value))
    found = []
    for where, ref in refs:
        fragment = unquote(ref[1:])
        if fragment.startswith("/") or not fragment:
            if fragment and resolve(schema, "#" + fragment) is None:
                found.append((where, _guess(schema, fragment)))
        elif fragment not in anchors:
            found.append((where, _guess(schema, pointer(("$defs", fragment)), anchors)))
    return sorted(found, key=lambda item: [str(x) for x in item[0]])


def misplaced_refs(schema: Any) -> list[Path]:
    """Paths of every local pointer reference in `schema` that names a value no schema
    keyword holds (under an unknown keyword, `default`, a `properties` map itself...).

    A validator follows such a pointer and applies the value as a schema, while
    every check that walks the schema's keywords (`schema_parts`: the size limits,
    the regexes) reads it as data: it is refused so that nothing is applied
    unchecked. References under a nested `$id` are left to the validator, as in
    `dangling_refs`; a pointer that names nothing is `dangling_refs`' to report.
    """
    refs = [
        ((*where, key), unquote(node[key][1:]))
        for node, where in schema_objects(schema, resources=False)
        for key in REF_KEYWORDS
        if isinstance(node.get(key), str) and node[key].startswith("#/")
    ]
    if not refs:
        return []
    places = {
        tuple(str(part) for part in path_of(trail))
        for _, trail, role in schema_parts(schema)
        if role == SCHEMA
    }
    found = []
    for where, fragment in refs:
        target = tuple(unescape(p) for p in fragment.split("/") if p)
        if target not in places and resolve(schema, "#" + fragment) is not None:
            found.append(where)
    return sorted(found, key=lambda p: [str(x) for x in p])


def _guess(schema: Any, fragment: str, anchors: set[str] | None = None) -> str | None:
    """The existing definition a pointer to `#/$defs/NAME` (or `definitions`) likely
    meant; for an anchor `#NAME` (`anchors` given), the anchor, else the definition."""
    from converge_dsl.diagnostics import did_you_mean

    parts = [unescape(p) for p in fragment.split("/")]
    if anchors:
        anchor = did_you_mean(parts[-1], anchors)
        if anchor is not None:
            return f"#{anchor}"
    if len(parts) != 3 or not isinstance(schema, Mapping):
        return None
    section = schema.get(parts[1])
    if not isinstance(section, Mapping):
        return None
    names = [str(n) for n in section]
    name = parts[2] if parts[2] in names else did_you_mean(parts[2], names)
    return None if name is None else "#" + pointer((parts[1], name))
