"""A JSON Schema as a readable outline, for `pack info`.

`outline(schema)` describes the fields of an object schema as indented lines
that read like the YAML a user writes:

    cost_matrix: array of array of number, at least 1 item  # Row i, column j: ...
    agents: array of string | object  # Agent ids ...
      id (required): string, at least 1 character  # Unique identifier.
    objective: "min" | "max", default "min"

Each field gives its type (array items, alternatives, enums and constants
included), its bounds and default, and its description; the fields of nested
objects (of array items and of object alternatives too) follow one level
deeper. Local `$ref`s (`#/$defs/...`) are followed, a recursive one is named
instead of expanded. The schema comes from a pack, so the walk is bounded:
at most `MAX_DEPTH` levels, `MAX_LINES` lines and `MAX_TEXT` characters of
description per line; what is cut is marked `...`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from converge_dsl._json_pointer import resolve
from converge_dsl._json_types import JsonSchema, JsonValue

MAX_DEPTH = 6
MAX_LINES = 300
MAX_TEXT = 200
MAX_ENUM = 8
_MAX_TYPE_LEVEL = 4

_BOUNDS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "at least {} character"),
    ("maxLength", "at most {} character"),
    ("minItems", "at least {} item"),
    ("maxItems", "at most {} item"),
    ("minProperties", "at least {} entry"),
    ("maxProperties", "at most {} entry"),
    ("format", "format {}"),
    ("pattern", "matching {}"),
)
_PLURAL = {"character": "characters", "item": "items", "entry": "entries"}


@dataclass(frozen=True, slots=True)
class OutlineLine:
    """One line of an outline: `text` indented `depth` levels."""

    depth: int
    text: str

    def __str__(self) -> str:
        return "  " * self.depth + self.text


def _json(value: JsonValue) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_TEXT else flat[: MAX_TEXT - 3] + "..."


class _Walker:
    def __init__(self, root: JsonSchema) -> None:
        self.root = root
        self.lines: list[OutlineLine] = []
        self.cut = False

    def resolve(
        self, schema: JsonValue, seen: frozenset[str]
    ) -> tuple[JsonSchema, frozenset[str], str | None]:
        """`schema` with its local `$ref`s merged in; the third item names a recursive ref."""
        for _ in range(32):  # a chain of refs longer than this is treated as recursive
            if not isinstance(schema, Mapping):
                return {}, seen, None
            ref = schema.get("$ref")
            if not isinstance(ref, str):
                return schema, seen, None
            if ref in seen:
                return schema, seen, ref
            target = resolve(self.root, ref)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if not isinstance(target, Mapping):
                return {**rest, "description": rest.get("description", f"see {ref}")}, seen, None
            schema, seen = {**target, **rest}, seen | {ref}
        return {}, seen, "$ref"

    def type_text(self, schema: JsonValue, seen: frozenset[str], level: int = 0) -> str:
        resolved, seen, recursive = self.resolve(schema, seen)
        if recursive is not None:
            return f"(recursive: {recursive})"
        if level > _MAX_TYPE_LEVEL:
            return "..."
        if "const" in resolved:
            return _json(resolved["const"])
        enum = resolved.get("enum")
        if isinstance(enum, list) and enum:
            shown = " | ".join(_json(v) for v in enum[:MAX_ENUM])
            return shown + (" | ..." if len(enum) > MAX_ENUM else "")
        for word in ("oneOf", "anyOf"):
            alternatives = resolved.get(word)
            if isinstance(alternatives, list) and alternatives and _all_typed(alternatives):
                return " | ".join(self.type_text(a, seen, level + 1) for a in alternatives)
        raw = resolved.get("type")
        if isinstance(raw, str):
            types = [raw]
        elif isinstance(raw, list):
            types = [t for t in raw if isinstance(t, str)]
        else:
            types = []
        if not types and raw is None:
            if "properties" in resolved:
                types = ["object"]
            elif "items" in resolved:
                types = ["array"]
        parts = []
        for kind in types:
            items = resolved.get("items")
            extra = resolved.get("additionalProperties")
            if kind == "array" and isinstance(items, Mapping):
                parts.append(f"array of {self.type_text(items, seen, level + 1)}")
            elif kind == "object" and not resolved.get("properties") and _has_shape(extra):
                parts.append(f"object of NAME -> {self.type_text(extra, seen, level + 1)}")
            else:
                parts.append(kind)
        return " | ".join(parts) or "any"

    def facts(self, schema: JsonSchema) -> list[str]:
        """Bounds, uniqueness and default of one (resolved) schema, as words."""
        words = []
        for key, template in _BOUNDS:
            value = schema.get(key)
            if not isinstance(value, str | int | float) or isinstance(value, bool):
                continue
            text = template.format(_json(value) if key == "pattern" else value)
            noun = text.rsplit(" ", 1)[-1]
            if noun in _PLURAL and value != 1:
                text = text[: -len(noun)] + _PLURAL[noun]
            words.append(text)
        if schema.get("uniqueItems") is True:
            words.append("unique items")
        if "default" in schema:
            words.append(f"default {_json(schema['default'])}")
        return words

    def emit(self, depth: int, text: str) -> bool:
        if len(self.lines) >= MAX_LINES:
            self.cut = True
            return False
        self.lines.append(OutlineLine(depth, text))
        return True

    def field(
        self, name: str, schema: JsonValue, required: bool, depth: int, seen: frozenset[str]
    ) -> None:
        resolved, _, _ = self.resolve(schema, seen)
        words = [self.type_text(schema, seen), *self.facts(resolved)]
        text = f"{name}{' (required)' if required else ''}: {', '.join(words)}"
        description = resolved.get("description")
        if isinstance(description, str) and description.strip():
            text += f"  # {_short(description)}"
        if self.emit(depth, text):
            self.children(schema, depth + 1, seen)

    def children(self, schema: JsonValue, depth: int, seen: frozenset[str]) -> None:
        """The fields inside `schema`: its properties, its items' and its alternatives'."""
        resolved, seen, recursive = self.resolve(schema, seen)
        if recursive is not None:
            return
        if depth > MAX_DEPTH:
            if _has_fields(resolved):
                self.emit(depth, "...")
            return
        properties = resolved.get("properties")
        required = resolved.get("required")
        needed = set(required) if isinstance(required, list) else set()
        if isinstance(properties, Mapping):
            for name, sub in properties.items():
                self.field(str(name), sub, str(name) in needed, depth, seen)
        extra = resolved.get("additionalProperties")
        if isinstance(properties, Mapping) and properties and _has_shape(extra):
            self.field("(any other name)", extra, False, depth, seen)
        elif not properties and _has_shape(extra):
            self.children(extra, depth, seen)
        items = resolved.get("items")
        if isinstance(items, Mapping):
            self.children(items, depth, seen)
        for word, label in (("oneOf", "exactly one of"), ("anyOf", "at least one of")):
            alternatives = resolved.get(word)
            if not isinstance(alternatives, list):
                continue
            if alternatives and not _all_typed(alternatives):
                groups = [_required_group(a) for a in alternatives]
                if all(groups):
                    self.emit(depth, f"({label}: {' or '.join(groups)})")
                    continue
            for alternative in alternatives:
                self.children(alternative, depth, seen)


def _has_shape(schema: JsonValue) -> bool:
    return isinstance(schema, Mapping) and bool(schema)


def _has_fields(schema: JsonSchema) -> bool:
    return any(k in schema for k in ("properties", "items", "oneOf", "anyOf"))


def _all_typed(alternatives: Sequence[JsonValue]) -> bool:
    """Whether every alternative says what it is (a type, ref, enum or const)."""
    keys = ("type", "$ref", "enum", "const", "properties", "items")
    return all(isinstance(a, Mapping) and any(k in a for k in keys) for a in alternatives)


def _required_group(alternative: JsonValue) -> str:
    """`{a, b}` for an alternative that only requires fields (`{required: [a, b], ...}`)."""
    if not isinstance(alternative, Mapping):
        return ""
    required = alternative.get("required")
    if not isinstance(required, list) or not required:
        return ""
    return "{" + ", ".join(str(r) for r in required) + "}"


def outline(schema: JsonSchema | None) -> tuple[OutlineLine, ...]:
    """The fields of `schema` (top-level properties at depth 0); () when it has none."""
    if not isinstance(schema, Mapping):
        return ()
    walker = _Walker(schema)
    walker.children(schema, 0, frozenset())
    if walker.cut:
        walker.lines.append(OutlineLine(0, f"... (cut at {MAX_LINES} lines)"))
    return tuple(walker.lines)


def type_summary(schema: JsonSchema | None) -> str:
    """The one-line type of `schema` with its bounds (`object`, `array of string`, ...)."""
    if not isinstance(schema, Mapping):
        return "any"
    walker = _Walker(schema)
    resolved, _, _ = walker.resolve(schema, frozenset())
    return ", ".join([walker.type_text(schema, frozenset()), *walker.facts(resolved)])
