"""The documented bounds of a JSON Schema applied to data, and JSON equality in linear time.

A schema a pipeline or pack applies to data is refused (`size_problems`, at
validate time a located error; at run time `UnsafeSchema` before any
validator is built) when it is wider than these limits, because checking one
value against it costs in proportion to its width:

- `MAX_SCHEMA_NODES`: every object member and array item of the schema,
  nested ones included (the walk stops once past it);
- `MAX_MEMBERS`: the entries of one `properties`, `patternProperties`,
  `dependentRequired`, `dependentSchemas`, `$defs` or `definitions`, and the
  names of one `required` or the schemas of one `prefixItems`;
- `MAX_ENUM`: the values of one `enum`;
- `MAX_BRANCHES`: the schemas of one `anyOf`, `oneOf` or `allOf`.

`canonical(value)` is a hashable key of a JSON value that two values share
exactly when JSON Schema calls them equal (`1 == 1.0`, objects by their
members whatever their order, arrays in order, `true` is not `1`); `uniqueItems`,
`enum` and `const` compare through it, each value walked once and charged to
the governor.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from converge_dsl.sandbox._governor import spend

MAX_SCHEMA_NODES = 20_000
MAX_MEMBERS = 1_000
MAX_ENUM = 1_000
MAX_BRANCHES = 128

_MEMBER_KEYWORDS = frozenset(
    (
        "properties",
        "patternProperties",
        "dependentRequired",
        "dependentSchemas",
        "$defs",
        "definitions",
    )
)
_LIST_LIMITS = {
    "enum": MAX_ENUM,
    "anyOf": MAX_BRANCHES,
    "oneOf": MAX_BRANCHES,
    "allOf": MAX_BRANCHES,
    "required": MAX_MEMBERS,
    "prefixItems": MAX_MEMBERS,
}
# Values that are data, not schemas: their members are counted, their keywords not read.
_DATA_KEYWORDS = frozenset(("enum", "const", "default", "examples"))

Path = tuple[str | int, ...]


def size_problems(schema: Any) -> list[tuple[Path, str]]:
    """(path inside `schema`, message) of every limit `schema` crosses; [] when within.

    Linear in the schema and stopping once past `MAX_SCHEMA_NODES` (located
    at the schema's root, last: after the keywords found too wide until then).
    """
    problems: list[tuple[Path, str]] = []
    nodes = 0
    stack: list[tuple[Any, Path, bool]] = [(schema, (), True)]
    while stack:
        node, where, is_schema = stack.pop()
        if isinstance(node, Mapping):
            nodes += len(node)
            for key, value in node.items():
                if is_schema:
                    problems.extend(_keyword_problem(key, value, (*where, key)))
                inner = is_schema and key not in _DATA_KEYWORDS
                stack.append((value, (*where, key), inner))
        elif isinstance(node, list | tuple):
            nodes += len(node)
            stack.extend((value, (*where, i), is_schema) for i, value in enumerate(node))
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


def _keyword_problem(key: str, value: Any, where: Path) -> Iterator[tuple[Path, str]]:
    if key in _MEMBER_KEYWORDS and isinstance(value, Mapping) and len(value) > MAX_MEMBERS:
        yield where, f"{key} has {len(value)} entries; at most {MAX_MEMBERS} are allowed"
    limit = _LIST_LIMITS.get(key)
    if limit is not None and isinstance(value, list | tuple) and len(value) > limit:
        yield where, f"{key} has {len(value)} items; at most {limit} are allowed"


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
