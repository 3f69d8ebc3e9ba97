"""JSON Schema validation with located, readable diagnostics.

`schema_diagnostics(doc, "pipeline.v1.json")` validates a loaded document
with jsonschema-rs (compiled once per process) and translates each error into
a `Diagnostic` at the offending key or value: unknown keys get "did you mean"
from the schema's own property names, enum misses from the allowed values,
and a number where text was expected gets the YAML 1.1 "quote it" hint.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl._record import Record
from converge_dsl._resources import read_schema_text
from converge_dsl.diagnostics import Diagnostic, JsonPath, did_you_mean, format_path, suggestion
from converge_dsl.frontend.document import LoadedDocument

if TYPE_CHECKING:
    from converge_dsl.frontend._kinds import SuggestorKind

_JSON_TYPES = {
    dict: "a mapping",
    list: "a list",
    str: "text",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "text",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "null": "null",
}
_RANGE = {"Minimum": ">=", "Maximum": "<=", "ExclusiveMinimum": ">", "ExclusiveMaximum": "<"}
_SIZE = frozenset(
    {
        "MinItems",
        "MaxItems",
        "UniqueItems",
        "MinLength",
        "MaxLength",
        "MinProperties",
        "MaxProperties",
    }
)


@lru_cache(maxsize=8)
def load_schema(name: str) -> dict[str, Any]:
    """The parsed schema `schemas/<name>` (cached)."""
    schema: dict[str, Any] = json.loads(read_schema_text(name))
    return schema


SCHEMA_BASE = "https://converge-dsl.dev/schemas/"


def shipped_schema(uri: str) -> dict[str, Any]:
    """The shipped schema a `$ref` to another schema file names (the pack schema's
    `tools` is the pipeline schema's); nothing is ever fetched. `ValueError` for
    any other address."""
    name = uri.split("#", 1)[0].removeprefix(SCHEMA_BASE)
    if "/" in name or not name.endswith(".v1.json"):
        raise ValueError(f"no shipped schema at {uri!r}")
    return load_schema(name)


@lru_cache(maxsize=8)
def _validator(name: str) -> Any:
    import jsonschema_rs

    return jsonschema_rs.validator_for(load_schema(name), retriever=shipped_schema)


PIPELINE_SCHEMA = "pipeline.v1.json"


def pipeline_schema(kinds: Sequence[SuggestorKind]) -> dict[str, Any]:
    """The pipeline schema whose `suggestors` items are one branch per kind, in order.

    The shipped `schemas/pipeline.v1.json` is this for the built-in kinds (a
    test holds that); a kind from elsewhere adds its own `$defs`. The parts it does
    not change are shared with the cached shipped schema (a deep copy costs more
    than validate's whole check of a small file): read it, never change it.
    """
    shipped = load_schema(PIPELINE_SCHEMA)
    defs: dict[str, Any] = dict(shipped["$defs"])
    for kind in kinds:
        if kind.schema is not None:
            defs.update(kind.schema)
    suggestor = defs["suggestor"] = dict(defs["suggestor"])
    properties = suggestor["properties"] = dict(suggestor["properties"])
    properties["kind"] = {**properties["kind"], "enum": [kind.name for kind in kinds]}
    suggestor["allOf"] = [
        {
            "if": {"properties": {"kind": {"const": kind.name}}, "required": ["kind"]},
            "then": {"$ref": f"#/$defs/{kind.branch}"},
        }
        for kind in kinds
    ]
    return {**shipped, "$defs": defs}


@lru_cache(maxsize=1)
def builtin_kind_names() -> frozenset[str]:
    """The kinds the shipped pipeline schema knows."""
    suggestor = load_schema(PIPELINE_SCHEMA)["$defs"]["suggestor"]
    return frozenset(suggestor["properties"]["kind"]["enum"])


_COMPOSED: dict[tuple[int, ...], tuple[dict[str, Any], Any]] = {}


def _composed(kinds: Sequence[SuggestorKind]) -> tuple[dict[str, Any], Any]:
    """The composed pipeline schema of `kinds` and its validator (once per process)."""
    marker = tuple(id(kind) for kind in kinds)
    found = _COMPOSED.get(marker)
    if found is None:
        import jsonschema_rs

        schema = pipeline_schema(kinds)
        found = _COMPOSED[marker] = (schema, jsonschema_rs.validator_for(schema))
    return found


def schema_diagnostics(
    doc: LoadedDocument, schema_name: str, kinds: Sequence[SuggestorKind] | None = None
) -> list[Diagnostic]:
    """Every schema violation of `doc` against `schemas/<schema_name>`, located.

    With `kinds`, the schema is the pipeline schema composed from them.
    """
    if kinds is None:
        validator = _validator(schema_name)
    else:
        schema, validator = _composed(kinds)
    if validator.is_valid(doc.data):
        return _text_lost(doc, validator, set())
    if kinds is None:
        schema = load_schema(schema_name)
    seen: set[tuple[str, int, int, str]] = set()
    out: list[Diagnostic] = []
    suggest = Suggestions()
    for error in validator.iter_errors(doc.data):
        for diagnostic in _translate(error, doc, schema, suggest):
            marker = (diagnostic.code, diagnostic.line, diagnostic.column, diagnostic.message)
            if marker not in seen:
                seen.add(marker)
                out.append(diagnostic)
    return out + (_text_lost(doc, validator, {d.path for d in out}) if doc.inexact else [])


def _text_lost(doc: LoadedDocument, validator: Any, reported: set[JsonPath]) -> list[Diagnostic]:
    """`NUMBER_TEXT_LOST` for each inexact float (`1.10`) where the schema takes any value.

    Where the schema wants a number (`min_confidence: 0.50`) the value is what
    counts; where it wants text, the schema has already said so. Free-form
    places are found by asking the schema: each inexact float is replaced by a
    list, and a place that takes the list takes anything.
    """
    found = [(path, text) for path, text in doc.inexact if path not in reported]
    if not found:
        return []
    lists = _replaced(doc.data, (path for path, _ in found))
    typed = {tuple(e.instance_path) for e in validator.iter_errors(lists)}
    smap = doc.source_map
    return [
        smap.diagnostic(
            codes.NUMBER_TEXT_LOST,
            f"{format_path(path)}: YAML reads {text!r} as the number {value!r}, losing its text",
            path,
            hint=f"write {value!r} for the number, or quote it for text: '{text}'",
        )
        for path, text in found
        if path not in typed
        for value in (_value_at(doc.data, path),)
    ]


def _replaced(data: Any, paths: Iterable[JsonPath]) -> Any:
    """A copy of `data` with a list at each of `paths` (only the containers on them copied)."""
    root: Any = dict(data) if isinstance(data, dict) else list(data)
    copies: dict[JsonPath, Any] = {(): root}
    for path in paths:
        node: Any = root
        for depth in range(1, len(path)):
            prefix = path[:depth]
            child = copies.get(prefix)
            if child is None:
                original = node[path[depth - 1]]
                child = copies[prefix] = (
                    dict(original) if isinstance(original, dict) else list(original)
                )
                node[path[depth - 1]] = child
            node = child
        node[path[-1]] = []
    return root


def _resource(error: Any, schema: dict[str, Any]) -> dict[str, Any]:
    """The schema `error.schema_path` walks: `schema`, or the other shipped schema a
    `$ref` led into (the path is then within that one: `$defs/NAME/...` of a
    definition `schema` does not hold)."""
    path = list(error.schema_path)
    if len(path) < 2 or path[0] != "$defs" or path[1] in schema.get("$defs", {}):
        return schema
    for name in _referenced(json.dumps(schema, sort_keys=True)):
        other = load_schema(name)
        if path[1] in other.get("$defs", {}):
            return other
    return schema


@lru_cache(maxsize=8)
def _referenced(text: str) -> tuple[str, ...]:
    """The other shipped schemas a schema's `$ref`s name (`pipeline.v1.json#/...`)."""
    return tuple(sorted(set(re.findall(r'"\$ref": "([a-z-]+\.v1\.json)#', text))))


def _subschema(schema: dict[str, Any], schema_path: Iterable[str | int]) -> Any:
    node: Any = schema
    for part in schema_path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return {}
    return node


def _value_at(data: Any, path: JsonPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _show(value: Any) -> str:
    """`value` in a message: text quoted as a name is (`quoted`: a key name, a suggestor's),
    anything else as JSON writes it; cut to 60 characters."""
    if isinstance(value, str):
        return quoted(value, 60)  # cut at an escape's edge, the quote closed
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


class _Error(Record):
    """One jsonschema-rs error and what every translation reads about it."""

    _fields = (
        "error",
        "doc",
        "schema",
        "path",
        "schema_path",
        "parent",
        "description",
        "where",
        "value",
    )
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (positional, as the fields are ordered)
        self,
        error: Any,
        doc: LoadedDocument,
        schema: dict[str, Any],
        path: JsonPath,
        schema_path: list[str | int],
        parent: Any,
        description: str | None,
        where: str,
        value: Any,
    ) -> None:
        self.error = error
        self.doc = doc
        self.schema = schema
        self.path = path
        self.schema_path = schema_path
        self.parent = parent  # the subschema holding the failed keyword
        self.description = description
        self.where = where
        self.value = value

    @classmethod
    def read(cls, error: Any, doc: LoadedDocument, schema: dict[str, Any]) -> _Error:
        path: JsonPath = tuple(error.instance_path)
        schema = _resource(error, schema)
        schema_path = list(error.schema_path)
        parent = _subschema(schema, schema_path[:-1])
        description = parent.get("description") if isinstance(parent, dict) else None
        return cls(
            error=error,
            doc=doc,
            schema=schema,
            path=path,
            schema_path=schema_path,
            parent=parent,
            description=description,
            where=format_path(path),
            value=_value_at(doc.data, path),
        )

    def at(
        self,
        code: str,
        message: str,
        target: JsonPath | None = None,
        *,
        hint: str | None = None,
        on_key: bool = False,
    ) -> Diagnostic:
        """A diagnostic at `target` (default: the failing value), or at its key with `on_key`."""
        target = self.path if target is None else target
        smap = self.doc.source_map
        span = smap.span_at(target, on_key=on_key)
        return Diagnostic.at(code, message, span, path=target, hint=hint)


class Suggestions:
    """Guesses for unknown names: once per distinct name, for at most `limit` names.

    A file with 450,000 unknown keys costs `limit` fuzzy matches, not one per
    key: past the limit (more than any rendering shows, see `MAX_PER_CODE`)
    a name gets no guess, and the hint lists the allowed names instead.
    """

    __slots__ = ("done", "limit")

    def __init__(self, limit: int = 200) -> None:
        self.limit = limit
        self.done: dict[tuple[str, tuple[str, ...]], str | None] = {}

    def __call__(self, word: str, candidates: tuple[str, ...]) -> str | None:
        key = (word, candidates)
        if key not in self.done:
            if len(self.done) >= self.limit:
                return None
            self.done[key] = did_you_mean(word, candidates)
        return self.done[key]


def _translate(
    error: Any, doc: LoadedDocument, schema: dict[str, Any], suggest: Suggestions
) -> Iterable[Diagnostic]:
    """The located diagnostics of one schema error, worded by the kind of error."""
    e = _Error.read(error, doc, schema)
    kind = type(error.kind).__name__
    if kind in _ALTERNATIVES and (branch := _fitting_branch(error, e.value)) is not None:
        return [d for inner in branch for d in _translate(inner, doc, schema, suggest)]
    if kind == "AdditionalProperties":
        return _unknown_keys(e, suggest)
    if kind == "Required":
        prop = error.kind.property
        hint = _describe(e.schema, [*e.schema_path[:-1], "properties", prop])
        message = f"missing required key {quoted(prop)} in {e.where}"
        return [e.at(codes.MISSING_FIELD, message, hint=hint, on_key=True)]
    if kind == "Type":
        return [_wrong_type(e)]
    if _is_choice(error):
        return [_not_allowed(e)]
    if kind == "Pattern":
        return [_bad_form(e)]
    if kind == "PropertyNames":
        return _property_names(error, doc, e.path, e.schema, e.schema_path)
    if kind in _RANGE:
        message = f"{e.where} must be {_RANGE[kind]} {error.kind.limit}, not {_show(e.value)}"
        return [e.at(codes.OUT_OF_RANGE, message, hint=e.description)]
    if kind in _SIZE:
        message = f"{e.where}: {_first_sentence(error.message)}"
        return [e.at(codes.BAD_SIZE, message, hint=e.description)]
    return [
        e.at(
            codes.SCHEMA_OTHER,
            f"{e.where}: {_show(e.value)} is not valid here",
            hint=e.description or _first_sentence(error.message),
        )
    ]


_KEY_PATTERN = "^[a-z][a-z0-9_]*$"  # schemas/pipeline.v1.json $defs/key
_ALTERNATIVES = frozenset(("OneOfNotValid", "AnyOf"))
# Errors that say a value is not of a branch's shape at all (another branch may be meant).
_SHAPE_MISSES = frozenset(("Type", "Required", "AdditionalProperties"))


def _fitting_branch(error: Any, value: Any) -> list[Any] | None:
    """The errors of the one `oneOf`/`anyOf` branch whose shape the value has, if one alone.

    A branch fits when none of its errors says the value itself is of another shape
    (a type, a required or an unknown key) or that a key telling the branches apart
    (a `const` just below) differs; its errors then say what to fix in it, where the
    alternatives' error could only say the value is "not valid here". A branch that
    only lists the values it takes fits when the value is close to one of them: a
    value far from all may have been meant for another branch, which the
    alternatives' description names.
    """
    own = len(error.instance_path)

    def misses(inner: Any) -> bool:
        depth, kind = len(inner.instance_path), type(inner.kind).__name__
        return (depth == own and kind in _SHAPE_MISSES) or (depth == own + 1 and kind == "Constant")

    def fits(errors: list[Any]) -> bool:
        return not any(misses(inner) for inner in errors)

    fitting = [errors for errors in getattr(error.kind, "context", None) or () if fits(errors)]
    if len(fitting) != 1 or not fitting[0]:
        return None
    branch: list[Any] = fitting[0]
    if len(branch) == 1 and len(branch[0].instance_path) == own and _is_choice(branch[0]):
        options = _options(branch[0])
        if not isinstance(value, str) or did_you_mean(value, options) is None:
            return None
    return branch


def _is_choice(error: Any) -> bool:
    return type(error.kind).__name__ in ("Enum", "Constant")


def _options(error: Any) -> list[str]:
    kind = error.kind
    options = kind.options if type(kind).__name__ == "Enum" else [kind.expected_value]
    return [str(o) for o in options]


def _bad_form(e: _Error) -> Diagnostic:
    """A pattern miss; a context key name gets the pattern itself and a corrected name."""
    if getattr(e.error.kind, "pattern", None) == _KEY_PATTERN and isinstance(e.value, str):
        fixed = re.sub(r"[^a-z0-9_]", "_", e.value.lower()).lstrip("0123456789_") or "key"
        return e.at(
            codes.BAD_FORMAT,
            f"{e.where}: {_show(e.value)} is not a valid key name: key names match "
            f"{_KEY_PATTERN} (lowercase letters, digits and '_', starting with a letter)",
            hint=f"write {quoted(fixed)}",
        )
    message = f"{e.where}: {_show(e.value)} has the wrong form"
    return e.at(codes.BAD_FORMAT, message, hint=e.description)


def _unknown_keys(e: _Error, suggest: Suggestions) -> Iterator[Diagnostic]:
    allowed = tuple(sorted(e.parent.get("properties", {})) if isinstance(e.parent, dict) else ())
    listed = f"allowed keys here: {', '.join(allowed)}" if allowed else None
    for key in e.error.kind.unexpected:
        guess = suggest(key, allowed)
        hint = suggestion(guess) if guess else listed
        yield e.at(
            codes.UNKNOWN_FIELD,
            f"unknown key {quoted(key)} in {e.where}",
            (*e.path, key),
            hint=hint,
            on_key=True,
        )


def _wrong_type(e: _Error) -> Diagnostic:
    wanted = " or ".join(_TYPE_WORDS.get(t, t) for t in _types(e.error.kind))
    found = _JSON_TYPES.get(type(e.value), type(e.value).__name__)
    location = e.doc.source_map.locate(e.path)
    if "text" in wanted and isinstance(e.value, int | float | bool) and location.style is None:
        span = location.span
        raw = (
            e.doc.line(span.line)[span.column - 1 : span.end_column - 1]
            if span.line == span.end_line
            else str(e.value)
        )
        return e.at(
            codes.VERSION_AS_NUMBER,
            f"{e.where}: YAML reads {raw!r} as {found} ({_show(e.value)}), text was expected",
            hint=f'quote it: "{raw}"',
        )
    if found in wanted:  # the type is right, the value is not (infinity, NaN): name it
        found = f"{_show(e.value)}, which JSON cannot hold"
    return e.at(codes.WRONG_TYPE, f"{e.where} must be {wanted}, not {found}", hint=e.description)


def _not_allowed(e: _Error) -> Diagnostic:
    words = _options(e.error)
    guess = did_you_mean(str(e.value), words) if isinstance(e.value, str) else None
    hint = suggestion(guess) if guess else f"allowed: {', '.join(words)}"
    return e.at(codes.NOT_ALLOWED_VALUE, f"{e.where}: {_show(e.value)} is not allowed", hint=hint)


def _types(kind: Any) -> list[str]:
    types = getattr(kind, "types", None) or []
    return [str(t).lower().rsplit(".", 1)[-1] for t in types]


def _describe(schema: dict[str, Any], schema_path: list[str | int]) -> str | None:
    node = _subschema(schema, schema_path)
    if isinstance(node, dict) and "$ref" in node:
        node = _subschema(schema, node["$ref"].removeprefix("#/").split("/")) | node
    description = node.get("description") if isinstance(node, dict) else None
    return str(description) if description else None


def _property_names(
    error: Any,
    doc: LoadedDocument,
    path: JsonPath,
    schema: dict[str, Any],
    schema_path: list[str | int],
) -> Iterable[Diagnostic]:
    value = _value_at(doc.data, path)
    if schema_path[-1:] == ["pattern"]:  # a `$ref` from propertyNames: the path is inside it
        schema_path = schema_path[:-1]
    names = _subschema(schema, schema_path)
    pattern = names.get("pattern") if isinstance(names, dict) else None
    for key in value if isinstance(value, dict) else ():
        if pattern is None or not re.search(pattern, key):
            span = doc.source_map.key_span((*path, key))
            yield Diagnostic.at(
                codes.BAD_FORMAT,
                f"{format_path(path)}: name {quoted(key)} has the wrong form",
                span,
                path=(*path, key),
                hint=f"names must match {pattern}" if pattern else None,
            )


def _first_sentence(message: str) -> str:
    return message.split("\n", 1)[0]


def bundled_schema(name: str) -> dict[str, Any]:
    """`schemas/<name>` standing alone: each definition it takes from another shipped
    schema (`pipeline.v1.json#/$defs/NAME`, the pack schema's `tools`) copied into its own
    `$defs` with the definitions those use, and the references made local. What `converge-dsl
    schema` prints, so an editor given the file needs no other."""
    schema = json.loads(json.dumps(load_schema(name)))
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    pending = list(_foreign_refs(schema))
    while pending:
        other, definition = pending.pop()
        if definition in defs:
            continue
        copied = json.loads(json.dumps(load_schema(other)["$defs"][definition]))
        defs[definition] = copied
        pending += [(other, d) for d in _local_refs(copied)]
    bundled: dict[str, Any] = _localised(schema)
    return bundled


def _foreign_refs(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        found = re.fullmatch(r"([a-z-]+\.v1\.json)#/\$defs/([A-Za-z]+)", str(node.get("$ref", "")))
        if found:
            yield found.group(1), found.group(2)
        for value in node.values():
            yield from _foreign_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _foreign_refs(value)


def _local_refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        found = re.fullmatch(r"#/\$defs/([A-Za-z]+)", str(node.get("$ref", "")))
        if found:
            yield found.group(1)
        for value in node.values():
            yield from _local_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _local_refs(value)


def _localised(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: re.sub(r"^[a-z-]+\.v1\.json#", "#", value) if key == "$ref" else _localised(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_localised(value) for value in node]
    return node
