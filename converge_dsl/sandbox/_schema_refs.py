"""The references of a schema a pipeline or pack supplies, for validate to report.

`remote_refs` finds every reference that does not start with `#` (resolved
nowhere: nothing is read from disk or the network); `dangling_refs` every
local one that names nothing in the schema (a pointer to no member, an anchor
no subschema declares), with the definition it likely meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from converge_dsl._json_pointer import resolve

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
DATA_KEYWORDS = frozenset(("enum", "const", "examples", "default"))  # values, not subschemas


def remote_refs(schema: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Paths (inside `schema`) of every `$ref`-like keyword that does not start with `#`."""
    found: list[tuple[str | int, ...]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(schema, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in REF_KEYWORDS and isinstance(value, str):
                    if not value.startswith("#"):
                        found.append((*where, key))
                else:
                    stack.append((value, (*where, key)))
        elif isinstance(node, list | tuple):
            stack.extend((value, (*where, i)) for i, value in enumerate(node))
    return sorted(found, key=lambda p: [str(x) for x in p])


def dangling_refs(schema: Any) -> list[tuple[tuple[str | int, ...], str | None]]:
    """(path, guess) of every local reference in `schema` that names nothing in it: a
    pointer (`#/$defs/x`) to no member, or an anchor (`#x`) no `$anchor` or
    `$dynamicAnchor` declares; `guess` is the existing `#/$defs/NAME` (or
    `definitions`) it likely meant. References under a nested `$id` resolve against
    that subschema and are left to the validator."""
    anchors: set[str] = set()
    refs: list[tuple[tuple[str | int, ...], str]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(schema, ())]
    while stack:
        node, where = stack.pop()
        if isinstance(node, Mapping):
            if where and "$id" in node:
                continue
            for key, value in node.items():
                if key in REF_KEYWORDS and isinstance(value, str):
                    if value.startswith("#"):
                        refs.append(((*where, key), value))
                elif key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
                    anchors.add(value)
                elif key not in DATA_KEYWORDS:
                    stack.append((value, (*where, key)))
        elif isinstance(node, list | tuple):
            stack.extend((value, (*where, i)) for i, value in enumerate(node))
    found = []
    for where, ref in refs:
        fragment = unquote(ref[1:])
        if fragment.startswith("/") or not fragment:
            if fragment and resolve(schema, "#" + fragment) is None:
                found.append((where, _guess(schema, fragment)))
        elif fragment not in anchors:
            found.append((where, _guess(schema, f"/$defs/{fragment}", anchors)))
    return sorted(found, key=lambda item: [str(x) for x in item[0]])


def _guess(schema: Any, fragment: str, anchors: set[str] | None = None) -> str | None:
    """The existing definition a pointer to `#/$defs/NAME` (or `definitions`) likely
    meant; for an anchor `#NAME` (`anchors` given), the anchor, else the definition."""
    from converge_dsl.diagnostics import did_you_mean

    if anchors:
        anchor = did_you_mean(fragment.rsplit("/", 1)[-1], anchors)
        if anchor is not None:
            return f"#{anchor}"
    parts = fragment.split("/")
    if len(parts) != 3 or not isinstance(schema, Mapping):
        return None
    section = schema.get(parts[1])
    if not isinstance(section, Mapping):
        return None
    names = [str(n) for n in section]
    name = parts[2] if parts[2] in names else did_you_mean(parts[2], names)
    return None if name is None else f"#/{parts[1]}/{name}"
