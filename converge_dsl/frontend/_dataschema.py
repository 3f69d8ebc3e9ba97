"""What a key's JSON Schema says about the data a template reads, for the static checks.

A `DataShape` is one place inside a key schema (the root schema, for local
`$ref`s, and a node). `field(name)` answers whether an object there has that
field: known (with the shape of its value), unknown (the object is closed:
`additionalProperties: false` and no `patternProperties`), or not checkable.
`allOf` branches add up, `anyOf`/`oneOf` know a field if any branch knows it
and are closed only if every branch is. `literal_problem` says whether
comparing a value there with a literal can ever be true (enum, type).
Nothing here imports a JSON Schema library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl._json_pointer import resolve as pointer
from converge_dsl._record import Record

_MAX_DEPTH = 32


class DataShape(Record):
    """A node of a key schema; `label` names the data for messages (`tickets data`)."""

    _fields = ("root", "node", "label")
    __slots__ = _fields

    def __init__(self, root: Any, node: Any, label: str) -> None:
        self.root = root
        self.node = node
        self.label = label

    def resolved(self) -> Any:
        return resolve(self.root, self.node)

    def field(self, name: str) -> tuple[bool | None, DataShape | None, tuple[str, ...]]:
        """(True, shape, names) when known; (False, None, names) when unknown; (None, ...) else."""
        known, closed = _cached_fields(self.root, self.node)
        if name in known:
            subs = known[name]
            node = subs[0] if len(subs) == 1 else {"anyOf": list(subs)}
            return True, DataShape(self.root, node, self.label), tuple(sorted(known))
        if closed:
            return False, None, tuple(sorted(known))
        return None, None, tuple(sorted(known))

    def element(self) -> DataShape | None:
        """The shape of an array's items, if the schema gives one."""
        node = self.resolved()
        if isinstance(node, Mapping) and isinstance(node.get("items"), Mapping | bool):
            return DataShape(self.root, node["items"], self.label)
        return None

    def literal_problem(self, value: Any) -> tuple[str, str] | None:
        """(kind, why) when this value can never equal `value`; kind: "enum" or "type"."""
        node = self.resolved()
        if not isinstance(node, Mapping):
            return None
        if "enum" in node and isinstance(node["enum"], list) and value not in node["enum"]:
            allowed = ", ".join(repr(v) for v in node["enum"])
            return "enum", f"{value!r} is not one of its values ({allowed})"
        types = node.get("type")
        types = [types] if isinstance(types, str) else types
        if not isinstance(types, list) or value is None or isinstance(value, bool):
            return None
        if isinstance(value, str) and not {"string"} & set(types):
            return "type", f"it is {' or '.join(types)}, compared with text {value!r}"
        if isinstance(value, int | float) and not {"number", "integer"} & set(types):
            return "type", f"it is {' or '.join(types)}, compared with the number {value!r}"
        return None


def resolve(root: Any, node: Any, depth: int = 0) -> Any:
    """`node` with local `$ref`s followed (`#`, `#/$defs/x`); a remote one resolves to {}."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and depth < _MAX_DEPTH:
        target = pointer(root, node["$ref"])
        if target is None:
            return {}
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        node = {**target, **siblings} if isinstance(target, Mapping) and siblings else target
        depth += 1
    return node


# (id(root), id(node)) -> (root, node, fields): the schema objects are kept alive with their
# entry, so an id is never reused while it is cached.
_FIELDS: dict[tuple[int, int], tuple[Any, Any, tuple[dict[str, list[Any]], bool]]] = {}


def _cached_fields(root: Any, node: Any) -> tuple[dict[str, list[Any]], bool]:
    entry = _FIELDS.get((id(root), id(node)))
    if entry is None:
        if len(_FIELDS) > 4096:
            _FIELDS.clear()
        entry = (root, node, _fields(root, node, 0))
        _FIELDS[(id(root), id(node))] = entry
    return entry[2]


def _fields(root: Any, node: Any, depth: int) -> tuple[dict[str, list[Any]], bool]:
    """(field -> the subschemas that describe it, whether the object is closed)."""
    node = resolve(root, node)
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return {}, False
    known: dict[str, list[Any]] = {}
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            known.setdefault(name, []).append(sub)
    closed = node.get("additionalProperties") is False and not node.get("patternProperties")
    for branch in node.get("allOf") or ():
        more, branch_closed = _fields(root, branch, depth + 1)
        for name, subs in more.items():
            known.setdefault(name, []).extend(subs)
        closed = closed or branch_closed
    alternatives = [_fields(root, b, depth + 1) for b in node.get("anyOf") or ()]
    alternatives += [_fields(root, b, depth + 1) for b in node.get("oneOf") or ()]
    for more, _ in alternatives:
        for name, subs in more.items():
            known.setdefault(name, []).extend(subs)
    if alternatives and not closed:
        closed = all(branch_closed for _, branch_closed in alternatives)
    return known, closed


def remote_refs(schema: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Paths (inside `schema`) of every `$ref` that does not start with `#`."""
    found: list[tuple[str | int, ...]] = []
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                if not value.startswith("#"):
                    found.append((*path, key))
            else:
                found.extend(remote_refs(value, (*path, key)))
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            found.extend(remote_refs(value, (*path, index)))
    return found
