"""The documented bounds of a JSON Schema applied to data, and JSON equality in linear time.

A schema a pipeline or pack applies to data is refused (`size_problems`, at
validate time a located error; at run time `UnsafeSchema` before any
validator is built) when it is wider than these limits, because checking one
value against it costs in proportion to its width:

- `MAX_SCHEMA_NODES`: every object member and array item of the schema,
  nested ones included, data too (the walk stops once past it);
- `MAX_MEMBERS`: the entries of one `properties`, `patternProperties`,
  `dependentRequired`, `dependentSchemas`, `dependencies`, `$defs` or
  `definitions`, and the names of one `required` or the schemas of one
  `prefixItems` (or `items` written as an array);
- `MAX_ENUM`: the values of one `enum`;
- `MAX_BRANCHES`: the schemas of one `anyOf`, `oneOf` or `allOf`.

Only keywords are limited: the walk is `_schema_refs.schema_parts`, which knows
a member named `enum` under `properties` for a name and the value of `default`
for data.

`canonical(value)` is a hashable key of a JSON value that two values share
exactly when JSON Schema calls them equal (`1 == 1.0`, objects by their
members whatever their order, arrays in order, `true` is not `1`); `uniqueItems`,
`enum` and `const` compare through it, each value walked once and charged to
the governor. `short_message` bounds the text of one schema error (python-jsonschema's
quotes the whole value at fault, however long).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from converge_dsl._long_lines import head_and_tail
from converge_dsl.sandbox._governor import spend
from converge_dsl.sandbox._schema_refs import SCHEMA, SCHEMAS, Trail, path_of, schema_parts

MAX_SCHEMA_NODES = 20_000
MAX_MEMBERS = 1_000
MAX_ENUM = 1_000
MAX_BRANCHES = 128
MESSAGE_CHARS = 500  # of one schema error's message: its start and its end are kept

# Keyword -> the most members (names) or items its value may hold.
_MEMBER_LIMITS = dict.fromkeys(
    (
        "properties",
        "patternProperties",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "$defs",
        "definitions",
    ),
    MAX_MEMBERS,
)
_LIST_LIMITS = {
    "enum": MAX_ENUM,
    "anyOf": MAX_BRANCHES,
    "oneOf": MAX_BRANCHES,
    "allOf": MAX_BRANCHES,
    "required": MAX_MEMBERS,
    "prefixItems": MAX_MEMBERS,
    "items": MAX_MEMBERS,  # its array form (before draft 2020-12) is `prefixItems`
}
_LIMITED = frozenset((*_MEMBER_LIMITS, *_LIST_LIMITS))

Path = tuple[str | int, ...]


def size_problems(schema: Any) -> list[tuple[Path, str]]:
    """(path inside `schema`, message) of every limit `schema` crosses; [] when within.

    The keywords are those of schema objects (`schema_parts`: a property named
    `enum` is a name, a keyword's data is never read as a schema). Linear in the
    schema and stopping once past `MAX_SCHEMA_NODES` (located at the schema's
    root, last: after the keywords found too wide until then).
    """
    problems: list[tuple[Path, str]] = []
    nodes = 0
    for part, trail, role in schema_parts(schema):
        if role == SCHEMA and isinstance(part, Mapping):
            nodes += len(part)
            problems.extend(_keyword_problems(part, trail))
        elif role == SCHEMAS:
            nodes += len(part)
        else:  # data, or something not a schema where one goes: every member counts
            nodes += _members(part, MAX_SCHEMA_NODES - nodes)
        if nodes > MAX_SCHEMA_NODES:
            break
    problems.sort(key=lambda problem: [str(p) for p in problem[0]])
    if nodes > MAX_SCHEMA_NODES:
        message = (
            f"the schema has more than {MAX_SCHEMA_NODES} members and items in all; "
            "checking data against it would cost in proportion"
        )
        problems.append(((), message))
    return problems


def _keyword_problems(node: Mapping[str, Any], trail: Trail) -> Iterator[tuple[Path, str]]:
    """The limits schema object `node` (at `trail`) crosses, looked up in time bounded
    by the limited keywords, however many members it has."""
    for key in node.keys() & _LIMITED:
        value = node[key]
        if key in _MEMBER_LIMITS and isinstance(value, Mapping):
            limit, what = _MEMBER_LIMITS[key], "entries"
        elif key in _LIST_LIMITS and isinstance(value, list | tuple):
            limit, what = _LIST_LIMITS[key], "items"
        else:
            continue
        if len(value) > limit:
            message = f"{key} has {len(value)} {what}; at most {limit} are allowed"
            yield path_of((trail, key)), message


def too_large(schema: Any) -> bool:
    """Whether `schema` has more than `MAX_SCHEMA_NODES` members and items in all: what
    `size_problems` counts, without telling keywords apart; stops once past it."""
    return _members(schema, MAX_SCHEMA_NODES) > MAX_SCHEMA_NODES


def _members(value: Any, budget: int) -> int:
    """The members and items of `value`, nested ones included, counted until past `budget`."""
    count = 0
    stack = [value]
    while stack and count <= budget:
        item = stack.pop()
        if isinstance(item, Mapping | list | tuple):
            count += len(item)
            if count <= budget:
                stack.extend(item.values() if isinstance(item, Mapping) else item)
    return count


_ARRAY, _OBJECT, _BOOL, _NUMBER = "a", "o", "b", "n"
_END = object()
_CHARGE_EVERY = 4096  # nodes walked between two charges to the governor


def canonical(value: Any) -> Any:
    """A hashable key of JSON `value`, equal for values JSON Schema calls equal.

    Strings stand for themselves, numbers are tagged (`1` and `1.0` share a
    key: Python's numbers compare and hash by value), booleans are tagged
    apart from numbers, arrays become tagged tuples, objects tagged frozensets
    of (member, key). Iterative; charges the governor one step and the items
    and characters walked every `_CHARGE_EVERY` nodes, so a huge value meets
    its bound and the deadline while it is walked.
    """
    built: list[list[Any]] = [[]]
    names: list[list[str] | None] = [None]
    walks: list[Iterator[Any]] = [iter((value,))]
    work = nodes = 0
    while walks:
        item = next(walks[-1], _END)
        if item is _END:
            walks.pop()
            parts, keys = built.pop(), names.pop()
            if not walks:
                spend(1, work)
                return parts[0]
            made = (
                (_ARRAY, tuple(parts))
                if keys is None
                else (_OBJECT, frozenset(zip(keys, parts, strict=True)))
            )
            built[-1].append(made)
            continue
        nodes += 1
        work += 1
        if nodes % _CHARGE_EVERY == 0:
            spend(1, work)
            work = 0
        if isinstance(item, str):
            work += len(item)
            built[-1].append(item)
        elif item is None:
            built[-1].append(None)
        elif isinstance(item, bool):
            built[-1].append((_BOOL, item))
        elif isinstance(item, int | float):
            built[-1].append((_NUMBER, item))
        elif isinstance(item, Mapping):
            keys = list(item)
            work += sum(map(len, keys))
            names.append(keys)
            built.append([])
            walks.append(iter(item.values()))
        elif isinstance(item, list | tuple):
            names.append(None)
            built.append([])
            walks.append(iter(item))
        else:  # not JSON: only equal to itself
            built[-1].append(("?", id(item)))
    raise AssertionError("unreachable")  # pragma: no cover


def short_message(message: str) -> str:
    """`message`, or its start and end (`'xxx… [N of M characters cut] …x' is not of
    type 'integer'`) when it is longer than `MESSAGE_CHARS` (`head_and_tail`)."""
    return head_and_tail(message, MESSAGE_CHARS)
