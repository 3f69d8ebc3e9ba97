"""`resolve(root, ref)`: the node a local JSON reference (`#`, `#/a/b`) names.

The one walker for the `$ref`s of key schemas (`frontend`) and of pack input
schemas (`pack info`'s outline): RFC 6901 escapes (`~1` is `/`, `~0` is `~`),
list indexes as digits, and None, never an exception, for anything that does
not resolve (a remote reference, a missing member, an index past the end).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def resolve(root: Any, ref: str) -> Any:
    """The node `ref` names inside `root`, or None when it names nothing there."""
    if not ref.startswith("#"):
        return None
    node = root
    for raw in filter(None, ref[1:].split("/")):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
