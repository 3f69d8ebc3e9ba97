"""A key schema written for an older draft, restated in draft 2020-12 for the service's documents.

The service checks a fact's data against its key's schema in the draft the
schema's `$schema` names (`converge_dsl.sandbox.draft_of`: drafts 4, 6 and 7,
2019-09, else 2020-12), while OpenAPI 3.1 and an MCP tool's output schema read
every schema as draft 2020-12. Copied as written, an older schema would say
something else there: draft 4's `exclusiveMaximum: true`, `items` written as an
array, `dependencies`, the siblings of a `$ref` (ignored up to draft 7), or a
keyword its draft does not know (draft 4's `const`) would all be read in
2020-12's sense. `in_2020_12(schema)` restates such a schema:

- a keyword its draft does not apply is dropped (its draft ignores it);
- draft 4's boolean `exclusiveMaximum` (`exclusiveMinimum`) makes its
  `maximum` (`minimum`) the exclusive bound; draft 4's `id` is `$id`, and a
  plain-name `$id` (`#name`) is `$anchor: name`;
- `items` written as an array is `prefixItems`, and `additionalItems` then
  `items` (otherwise it is ignored, and dropped);
- `dependencies` is `dependentRequired` (its lists of names) and
  `dependentSchemas` (its schemas);
- next to a `$ref` (drafts 4 to 7), every keyword that would assert, and
  `$id`, is dropped; definitions and annotations stay;
- `$schema` goes: the schema is 2020-12's now.

Draft 4's `integer` is read wider in 2020-12 (`2.0` is one there), which is
looser, unless a `not` or a `oneOf` turns it around: a draft 4 schema with both
is not restated.

Each rule keeps the schema's meaning, so the restated schema accepts what the
key's schema accepts. For a schema that cannot be restated so (draft 3, a
subschema naming its own `$schema`, a reference to a part restated elsewhere or
dropped, an anchor its draft does not declare, a part that is no 2020-12 schema
once restated) it gives the reason instead,
which the placement puts in the `description` of a schema accepting any value.
A 2020-12 schema is returned as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from converge_dsl._json_pointer import unescape
from converge_dsl.sandbox import (
    REF_KEYWORDS,
    anchors_of,
    draft_of,
    embedded_resource,
    keyword_role,
    meta_error,
    schema_objects,
)

Path = tuple[str | int, ...]

_RESTATED = ("draft-04", "draft-06", "draft-07", "2019-09")
_LEGACY_REF = ("draft-04", "draft-06", "draft-07")  # `$ref`'s siblings are ignored
_BOUNDS = {"maximum": "exclusiveMaximum", "minimum": "exclusiveMinimum"}


@functools.cache
def _asserting() -> frozenset[str]:
    """The keywords that assert in 2020-12 (and `$recursiveRef`, which the placement
    makes a `$ref`)."""
    return draft_of({}).keywords | {"$recursiveRef"}


class _Untranslatable(Exception):
    """Why a schema cannot be restated; caught in `in_2020_12`, never raised past it."""


def in_2020_12(schema: Any) -> tuple[Any, str | None]:
    """(`schema` restated in draft 2020-12, None), `schema` itself when it is 2020-12's
    already; or (None, why it cannot be restated) (see the module docstring)."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("$schema"), str):
        return schema, None  # python-jsonschema's default: 2020-12
    draft = draft_of(schema)
    if draft.name == "2020-12":
        return schema, None
    if draft.name not in _RESTATED:
        return None, f"is written for {draft.name}"
    restating = _Restating(draft.name, draft.keywords)
    try:
        restated = restating.schema(schema, ())
        restating.check_references(restated)
        if restating.integers and restating.negated:
            # Draft 4's integers are not 2020-12's (2.0 is one there only), which `not`
            # or `oneOf` could turn into refusing what the key's schema accepts.
            raise _Untranslatable("its integer, which 2020-12 reads wider, is under not or oneOf")
    except _Untranslatable as exc:
        return None, f"is written for {draft.name} and {exc}"
    error = meta_error(restated)  # a part its draft never reads as a schema, say
    if error is not None:
        return None, f"is written for {draft.name} and is no draft 2020-12 schema restated"
    return restated, None


class _Restating:
    """One schema's restatement: the places it changed, for its references' sake."""

    def __init__(self, draft: str, keywords: frozenset[str]) -> None:
        self.draft = draft
        self.keywords = keywords
        self.ignored = _asserting() - keywords  # the draft ignores these
        self.changed: list[Path] = []  # places of the schema dropped or moved
        self.integers = self.negated = False  # draft 4: `type: integer`; `not` or `oneOf`

    def schema(self, node: Any, path: Path) -> Any:
        """The schema `node` (at `path`) restated."""
        if not isinstance(node, Mapping):
            return node
        if path and "$schema" in node:
            raise _Untranslatable(f"names a draft of its own at {_pointer(path)} ($schema)")
        draft4 = self.draft == "draft-04"
        ref_only = self.draft in _LEGACY_REF and "$ref" in node
        restated: dict[str, Any] = {}
        if draft4:
            types = node.get("type")
            self.integers |= types == "integer" or (
                isinstance(types, list | tuple) and "integer" in types
            )
            self.negated |= "not" in node or "oneOf" in node
        for key, value in node.items():
            at = (*path, key)
            if key in ("$schema", "additionalItems") or (draft4 and key in _BOUNDS.values()):
                continue  # `$schema` goes; the others are read with `items` and the bounds
            if draft4 and key == "$id":
                continue  # not draft 4's: its `id` is
            if key in self.ignored or (ref_only and key != "$ref" and _asserts(key, draft4)):
                self.changed.append(at)
            elif key == ("id" if draft4 else "$id") and isinstance(value, str):
                if value.startswith("#"):  # a plain name: 2020-12's `$anchor`
                    restated["$anchor"] = value[1:]
                else:
                    restated["$id"] = value
            elif draft4 and key in _BOUNDS:
                exclusive = node.get(_BOUNDS[key]) is True
                restated[_BOUNDS[key] if exclusive else key] = value
            elif key == "items" and isinstance(value, list | tuple):
                self.changed.append(at)
                restated["prefixItems"] = [self.schema(v, (*at, i)) for i, v in enumerate(value)]
                if "additionalItems" in node:
                    self.changed.append((*path, "additionalItems"))
                    restated["items"] = self.schema(
                        node["additionalItems"], (*path, "additionalItems")
                    )
            elif key == "dependencies" and key in self.keywords and isinstance(value, Mapping):
                self.changed.append(at)
                for name, each in value.items():
                    word = (
                        "dependentRequired"
                        if isinstance(each, list | tuple)
                        else "dependentSchemas"
                    )
                    restated.setdefault(word, {})[name] = self.schema(each, (*at, name))
            else:
                restated[key] = self.part(key, value, at)
        return restated

    def part(self, key: str, value: Any, at: Path) -> Any:
        """The value of keyword `key` (at `at`) restated: its schemas (`keyword_role`, as
        validate reads them), or data as it is."""
        role = keyword_role(key, value)
        if role == "schema":
            return self.schema(value, at)
        if role == "schemas" and isinstance(value, Mapping):
            return {name: self.schema(v, (*at, name)) for name, v in value.items()}
        if role == "schemas":
            return [self.schema(v, (*at, i)) for i, v in enumerate(value)]
        return value

    def check_references(self, restated: Any) -> None:
        """Raise `_Untranslatable` for a reference of `restated` whose target moved or was
        dropped: a pointer through a changed place (any pointer once a subschema starts
        a resource of its own), an anchor no longer declared."""
        objects = list(schema_objects(restated))
        anchors = {name for node, _ in objects for name in anchors_of(node)}
        nested = any(where and embedded_resource(node) for node, where in objects)
        for node, _ in objects:
            for word in REF_KEYWORDS:
                ref = node.get(word)
                if not isinstance(ref, str) or not ref.startswith("#"):
                    continue
                fragment = unquote(ref[1:])
                if fragment and not fragment.startswith("/"):
                    if fragment not in anchors:
                        raise _Untranslatable(f"its anchor {ref!r} is declared otherwise there")
                    continue
                parts = fragment.split("/")[1:]
                target = tuple(unescape(p) for p in parts)
                if self.changed and (nested or any(_within(target, p) for p in self.changed)):
                    raise _Untranslatable(
                        f"{word} {ref!r} points to a place that draft 2020-12 words otherwise"
                    )


def _asserts(key: str, draft4: bool) -> bool:
    """Whether keyword `key` (next to a `$ref`) would assert, or name a resource, in 2020-12."""
    return key in _asserting() or key == "$id" or (draft4 and key == "id")


def _within(target: tuple[str, ...], place: Path) -> bool:
    """Whether pointer `target` is `place` or inside it."""
    return len(target) >= len(place) and all(
        str(p) == t for p, t in zip(place, target, strict=False)
    )


def _pointer(path: Path) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)
