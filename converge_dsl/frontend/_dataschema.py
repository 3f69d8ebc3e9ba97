"""What a key's JSON Schema says about the data a template reads, for the static checks.

A `DataShape` is one place inside a key schema (the root schema, for local
`$ref`s, and a node). `field(name)` answers whether an object there has that
field: known (with the shape of its value), unknown (the object is closed:
`additionalProperties: false` and no `patternProperties`), or not checkable.
`allOf` branches add up, `anyOf`/`oneOf` know a field if any branch knows it
and are closed only if every branch is; a field only `required` is known.
`unnamed(name)` says an open object names its fields and `name` is not one
(nor are others allowed outright). `literal_problem` says whether comparing a
value there with a literal can ever be true (enum, type), `operand_problem`
whether ordering or arithmetic with a literal fails at run time (Python orders
and adds only like with like). `item_schema` is what an llm's `output.schema`,
which checks the whole answer, says of each item.
Nothing here imports a JSON Schema library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl._escapes import quoted
from converge_dsl._json_pointer import resolve as pointer
from converge_dsl._record import Record

_MAX_DEPTH = 32


class DataShape(Record):
    """A node of a key schema; `label` names the data for messages (`tickets data`),
    `source` the schema it comes from (`the schema of key 'tickets'`, `output.schema`)."""

    _fields = ("root", "node", "label", "source")
    __slots__ = _fields

    def __init__(self, root: Any, node: Any, label: str, source: str = "schema") -> None:
        self.root = root
        self.node = node
        self.label = label
        self.source = source

    def at(self, node: Any, label: str | None = None) -> DataShape:
        """The shape of `node`, inside the same schema (named `label`, or this one's)."""
        return DataShape(self.root, node, self.label if label is None else label, self.source)

    def resolved(self) -> Any:
        return resolve(self.root, self.node)

    def field(self, name: str) -> tuple[bool | None, DataShape | None, tuple[str, ...]]:
        """(True, shape, names) when known; (False, None, names) when unknown; (None, ...) else."""
        known, closed, _ = _cached_fields(self.root, self.node)
        if name in known:
            subs = known[name]
            node = subs[0] if len(subs) == 1 else {"anyOf": list(subs)}
            return True, self.at(node), tuple(sorted(known))
        if closed:
            return False, None, tuple(sorted(known))
        return None, None, tuple(sorted(known))

    def unnamed(self, name: str) -> bool:
        """An open object here names its fields (`properties`, `required`), allows no others
        outright (`additionalProperties`, `patternProperties`), and `name` is not one."""
        known, closed, open_ = _cached_fields(self.root, self.node)
        return bool(known) and not closed and not open_ and name not in known

    def element(self) -> DataShape | None:
        """The shape of an array's items, if the schema gives one."""
        node = self.resolved()
        if isinstance(node, Mapping) and isinstance(node.get("items"), Mapping | bool):
            return self.at(node["items"])
        return None

    def types(self) -> tuple[str, ...]:
        """The JSON types the schema allows here (from `type`, else its `enum` or `const`);
        () when it does not say."""
        node = self.resolved()
        if not isinstance(node, Mapping):
            return ()
        types = node.get("type")
        if isinstance(types, str):
            return (types,)
        if isinstance(types, list):
            return tuple(t for t in types if isinstance(t, str))
        values = node.get("enum") if isinstance(node.get("enum"), list) else None
        if values is None and "const" in node:
            values = [node["const"]]
        if not values:
            return ()
        return tuple(dict.fromkeys(_json_type(v) for v in values))

    def literal_problem(self, value: Any) -> tuple[str, str] | None:
        """(kind, why) when this value can never equal `value`; kind: "enum" or "type"."""
        node = self.resolved()
        if not isinstance(node, Mapping):
            return None
        if "enum" in node and isinstance(node["enum"], list) and value not in node["enum"]:
            allowed = ", ".join(shown_value(v) for v in node["enum"])
            return "enum", f"{shown_value(value)} is not one of its values ({allowed})"
        types = node.get("type")
        types = [types] if isinstance(types, str) else types
        if not isinstance(types, list) or value is None or isinstance(value, bool):
            return None
        if isinstance(value, str) and not {"string"} & set(types):
            return "type", f"it is {' or '.join(types)}, compared with text {quoted(value)}"
        if isinstance(value, int | float) and not {"number", "integer"} & set(types):
            return "type", f"it is {' or '.join(types)}, compared with the number {value!r}"
        return None

    def operand_problem(self, operator: str, value: Any) -> str | None:
        """Why `operator` (`<`, `+`...) between a value here and the literal `value` fails at
        run time (Python orders and adds only like with like), or None."""
        types = set(self.types())
        if not types or value is None or isinstance(value, list | dict):
            return None
        numeric = {"integer", "number", "boolean"}
        text = isinstance(value, str)
        if operator in ("<", "<=", ">", ">=", "+"):
            allowed = {"string"} if text else numeric
        elif operator in ("-", "/", "//", "**"):
            allowed = set() if text else numeric
        else:
            return None  # `*` repeats text, `%` formats it, `~` joins anything
        if types & allowed:
            return None
        shown = f"text {quoted(value)}" if text else f"the number {value!r}"
        return f"{self.source} makes it {' or '.join(sorted(types))}, and {shown} is not"


def shown_value(value: Any) -> str:
    """A value in a message: text quoted as every message quotes it (`quoted`), anything
    else as JSON writes it (a schema's `enum` is JSON: `null`, `true`)."""
    import json

    return quoted(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def item_schema(schema: Any) -> Any:
    """The schema of each item of an llm `json` answer that `schema` (output.schema) checks
    whole: an array's `items`, the object itself (an object answer is one item), or both;
    None when it says neither."""
    if not isinstance(schema, Mapping):
        return None
    types = schema.get("type")
    types = [types] if isinstance(types, str) else types if isinstance(types, list) else None
    found: list[Any] = []
    items = schema.get("items")
    if isinstance(items, Mapping) and (types is None or "array" in types):
        found.append(items)
    shaped = any(k in schema for k in ("properties", "required", "additionalProperties"))
    if (types is not None and "object" in types) or (types is None and shaped):
        found.append(schema)
    if not found:
        return None
    return found[0] if len(found) == 1 else {"anyOf": found}


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
_Fields = tuple[dict[str, list[Any]], bool, bool]
_FIELDS: dict[tuple[int, int], tuple[Any, Any, _Fields]] = {}


def _cached_fields(root: Any, node: Any) -> _Fields:
    entry = _FIELDS.get((id(root), id(node)))
    if entry is None:
        if len(_FIELDS) > 4096:
            _FIELDS.clear()
        entry = (root, node, _fields(root, node, 0))
        _FIELDS[(id(root), id(node))] = entry
    return entry[2]


def _fields(root: Any, node: Any, depth: int) -> _Fields:
    """(field -> the subschemas that describe it, whether the object is closed, whether it
    allows other fields outright). A field only `required` is known, of any shape."""
    node = resolve(root, node)
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return {}, False, True
    known: dict[str, list[Any]] = {}
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            known.setdefault(name, []).append(sub)
    for name in node.get("required") or ():
        if isinstance(name, str) and name not in known:
            known[name] = [{}]
    patterns = bool(node.get("patternProperties"))
    closed = node.get("additionalProperties") is False and not patterns
    open_ = patterns or any(
        key in node and node[key] is not False
        for key in ("additionalProperties", "unevaluatedProperties")
    )
    for branch in node.get("allOf") or ():
        more, branch_closed, branch_open = _fields(root, branch, depth + 1)
        for name, subs in more.items():
            known.setdefault(name, []).extend(subs)
        closed = closed or branch_closed
        open_ = open_ or branch_open
    alternatives = [_fields(root, b, depth + 1) for b in node.get("anyOf") or ()]
    alternatives += [_fields(root, b, depth + 1) for b in node.get("oneOf") or ()]
    for more, _, branch_open in alternatives:
        for name, subs in more.items():
            known.setdefault(name, []).extend(subs)
        open_ = open_ or branch_open or not more  # a branch naming nothing takes anything
    if alternatives and not closed:
        closed = all(branch_closed for _, branch_closed, _ in alternatives)
    return known, closed, open_
