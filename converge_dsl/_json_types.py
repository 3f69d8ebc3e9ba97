"""The types of JSON values as the package passes them around.

`JsonValue` is what `json.loads` (or the YAML loader, after the schema has
checked a document) gives: text, numbers, booleans, null, lists and
mappings of them. Code that reads one narrows it with `isinstance`, as the
data is the user's and its shape is only what a schema promised.
`JsonObject` is a mapping of them (inputs, a fact's data); `JsonSchema` is a
JSON Schema document (a key schema, a pack's input schema), which the
package hands to jsonschema-rs and reads only through the few members it
names. `json_depth` measures how deeply a decoded value nests (`nests_deeper`, whether
it passes a bound, given the text too); a run's inputs
nest at most `MAX_INPUT_DEPTH` deep (the command line's `--input` and `--inputs`,
and a batch's cases, bound them so; the service bounds a request's whole body).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = JsonScalar | Sequence["JsonValue"] | Mapping[str, "JsonValue"]
JsonObject: TypeAlias = Mapping[str, JsonValue]
JsonSchema: TypeAlias = Mapping[str, JsonValue]

MAX_INPUT_DEPTH = 64


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in `value` (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in item)
    return deepest


def nests_deeper(value: Any, text: str, limit: int) -> bool:
    """Whether `value`, decoded from JSON `text`, nests deeper than `limit`. A value nests
    no deeper than the brackets its text holds: most texts need no walk of the value."""
    return text.count("[") + text.count("{") > limit and json_depth(value) > limit
