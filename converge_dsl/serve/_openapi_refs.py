"""A pipeline's JSON Schema placed inside a larger document, its references still resolving.

A key schema refers within itself (`#`, `#/$defs/node`, `#/definitions/x`,
`#/properties/a/items`, an `$anchor`'s `#name`); validate refuses every other
reference. Copied as it is into the OpenAPI document or an MCP tool's output
schema, those fragments would name places of the new root, not of the schema.
`Components` gives each placed schema a component of its own, under a name no
other component holds, and hoists the `$defs` and `definitions` of its root
into components of their own (named after the schema's, so two keys' same-named
definitions never meet); each reference is rewritten to the place its target
now has (`#/components/schemas/EchoTreeNode`, or `#/$defs/...` in an MCP
schema), its rest kept as a pointer, so recursion still works. An embedded
`$id` starts a resource whose `#...` references resolve from it, unless it is a
plain name (`$id: "#foo"`, drafts 6 and 7), which is an anchor like
`$anchor: foo`; the `$id` is dropped, as are `$anchor` and `$dynamicAnchor`,
once every reference to them is a pointer. Values that are data (`const`,
`enum`, `default`, `examples`) are copied untouched, as are schema members
named like keywords under `properties` and the other maps of schemas.

A schema written for an older draft (its `$schema`: draft 4, 6, 7 or 2019-09)
is first restated in draft 2020-12, which the document speaks
(`_openapi_drafts`); one that cannot be restated faithfully is placed as a
component that accepts any value, whose `description` says why.

A `$dynamicRef` (or `$recursiveRef`) resolves dynamically when its anchor is
declared in more than one resource of the schema: which one it lands on
depends on the path the check took, which no pointer can say. Such a schema
is placed as a component that accepts any value, whose `description` says
why (looser than the key's schema, never stricter; the service checks facts
against the key's own schema when they are made).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from converge_dsl._json_pointer import pointer, unescape
from converge_dsl.sandbox import DATA_KEYWORDS, SCHEMA_MAPS, anchors_of, embedded_resource

from ._openapi_drafts import in_2020_12

Place = tuple[str, ...]  # a path inside the placed schema, from its root

_DATA = DATA_KEYWORDS
_MAPS = SCHEMA_MAPS
_DEFS = ("$defs", "definitions")
_REFS = frozenset(("$ref", "$dynamicRef", "$recursiveRef"))
_DROPPED = frozenset(("$id", "$anchor", "$dynamicAnchor"))
_NAME_PARTS = re.compile(r"[A-Za-z0-9]+")
_FRAGMENT_SAFE = "/$~!&'()*+,;=:@-._"


def camel(text: str) -> str:
    """`node_list` -> `NodeList`, `nodeList` -> `NodeList`: a component name's part."""
    return "".join(p[:1].upper() + p[1:] for p in _NAME_PARTS.findall(text))


class Components:
    """The named schemas of one document, whose references read `prefix` + name."""

    def __init__(self, prefix: str, schemas: Mapping[str, Any]) -> None:
        self.prefix = prefix
        self.schemas: dict[str, Any] = dict(schemas)

    def ref(self, name: str) -> dict[str, Any]:
        """A reference to the component `name`."""
        return {"$ref": self.prefix + name}

    def name(self, wanted: str) -> str:
        """`wanted`, or `wanted2`, `wanted3`... : the first no component holds yet."""
        name, number = wanted, 1
        while name in self.schemas:
            number += 1
            name = f"{wanted}{number}"
        self.schemas[name] = None  # taken now, filled by the caller
        return name

    def place(self, schema: Any, wanted: str) -> dict[str, Any]:
        """A reference to `schema` placed as a component named like `wanted` (see the
        module docstring)."""
        root = self.name(wanted)
        schema, untranslatable = in_2020_12(schema)
        if untranslatable is not None:
            self.schemas[root] = {"description": _UNTRANSLATED.format(untranslatable)}
            return self.ref(root)
        dynamic = _dynamic_ref(schema)
        if dynamic is not None:
            self.schemas[root] = {"description": _UNPLACED.format(dynamic)}
            return self.ref(root)
        homes: dict[Place, str] = {(): root}
        for defs, key in _hoisted(schema):
            homes[(defs, key)] = self.name(f"{root}{camel(key) or 'Def'}")
        places = _Places(schema, homes, self.prefix)
        for path, home in homes.items():
            node = schema[path[0]][path[1]] if path else schema
            self.schemas[home] = places.copy(node, path, ())
        placed = self.schemas[root]
        for defs in {path[0] for path in homes if path}:
            placed.pop(defs)
        return self.ref(root)


_UNTRANSLATED = (
    "Any JSON value here: the key's own schema {}, which a draft 2020-12 schema placed in "
    "this document cannot say; facts are checked against the key's own schema when they "
    "are made."
)
_UNPLACED = (
    "Any JSON value here: the key's own schema resolves {} dynamically (its anchor is "
    "declared in more than one resource), which a schema placed in this document cannot "
    "express; facts are checked against the key's own schema when they are made."
)


def _dynamic_ref(schema: Any) -> str | None:
    """The first `$dynamicRef` (or `$recursiveRef`) in `schema`, worded, whose target
    depends on the dynamic scope: its anchor is declared in more than one resource."""
    declared: dict[tuple[str, str], set[Place]] = {}  # (keyword, anchor) -> its resources
    refs: list[tuple[str, str]] = []  # (keyword, value)

    def walk(node: Any, path: Place, resource: Place) -> None:
        if isinstance(node, list | tuple):
            for i, value in enumerate(node):
                walk(value, (*path, str(i)), resource)
            return
        if not isinstance(node, Mapping):
            return
        if path and embedded_resource(node):
            resource = path
        if isinstance(node.get("$dynamicAnchor"), str):
            declared.setdefault(("$dynamicRef", node["$dynamicAnchor"]), set()).add(resource)
        if node.get("$recursiveAnchor") is True:
            declared.setdefault(("$recursiveRef", ""), set()).add(resource)
        for word in ("$dynamicRef", "$recursiveRef"):
            if isinstance(node.get(word), str):
                refs.append((word, node[word]))
        for value, where in _children(node, path):
            walk(value, where, resource)

    walk(schema, (), ())
    for word, ref in refs:
        name = unquote(ref[1:]) if word == "$dynamicRef" and ref.startswith("#") else ""
        if "/" not in name and len(declared.get((word, name), ())) > 1:
            return f"{word} {ref!r}"
    return None


def _hoisted(schema: Any) -> list[tuple[str, str]]:
    """The places (`$defs` or `definitions`, name) of the definitions of `schema`'s root."""
    if not isinstance(schema, Mapping):
        return []
    return [
        (defs, key)
        for defs in _DEFS
        if isinstance(schema.get(defs), Mapping)
        for key in schema[defs]
    ]


class _Places:
    """Where each place of one schema went (`homes`: its root and hoisted definitions),
    its anchors found first, per resource."""

    def __init__(self, schema: Any, homes: Mapping[Place, str], prefix: str) -> None:
        self.homes = homes
        self.prefix = prefix
        self.anchors: dict[tuple[Place, str], Place] = {}
        self._index(schema, (), ())

    def _index(self, node: Any, path: Place, resource: Place) -> None:
        if isinstance(node, Mapping):
            if path and embedded_resource(node):
                resource = path
            for name in anchors_of(node):
                self.anchors.setdefault((resource, name), path)
            for value, where in _children(node, path):
                self._index(value, where, resource)
        elif isinstance(node, list | tuple):
            for i, value in enumerate(node):
                self._index(value, (*path, str(i)), resource)

    def copy(self, node: Any, path: Place, resource: Place) -> Any:
        """`node` (at `path` of the schema) with its references rewritten."""
        if isinstance(node, list | tuple):
            return [self.copy(v, (*path, str(i)), resource) for i, v in enumerate(node)]
        if not isinstance(node, Mapping):
            return node
        if path and embedded_resource(node):
            resource = path
        copied: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED and isinstance(value, str):
                continue
            if key in _REFS and isinstance(value, str):
                word = key if "$ref" in node else "$ref"  # a pointer now: no dynamic scope
                copied[word] = self._target(value, resource)
            elif key in _DATA:
                copied[key] = value
            elif key in _MAPS and isinstance(value, Mapping):
                copied[key] = {
                    name: self.copy(item, (*path, key, name), resource)
                    for name, item in value.items()
                }
            else:
                copied[key] = self.copy(value, (*path, key), resource)
        return copied

    def _target(self, ref: str, resource: Place) -> str:
        """The document's reference for `ref`, written inside `resource`."""
        fragment = unquote(ref[1:]) if ref.startswith("#") else None
        if fragment is None:
            return ref  # validate refuses these before a schema is ever placed
        if fragment and not fragment.startswith("/"):
            found = self.anchors.get((resource, fragment))
            if found is None:
                return ref
            target = found
        else:
            parts = tuple(unescape(p) for p in fragment.split("/")[1:])
            target = (*resource, *parts)
        home, rest = self.homes[()], target
        if target[:2] in self.homes:
            home, rest = self.homes[target[:2]], target[2:]
        return self.prefix + home + quote(pointer(rest), safe=_FRAGMENT_SAFE)


def _children(node: Mapping[str, Any], path: Place) -> Iterable[tuple[Any, Place]]:
    """The members of a schema object that may hold schemas, with their places."""
    for key, value in node.items():
        if key in _DATA:
            continue
        if key in _MAPS and isinstance(value, Mapping):
            for name, item in value.items():
                yield item, (*path, key, name)
        else:
            yield value, (*path, key)
