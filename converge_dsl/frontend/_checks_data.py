"""Semantic checks of structured data: key schemas, data fields read by templates, constant data.

- `key_schemas_valid`: every `keys[].schema` is a JSON Schema 2020-12 whose
  `$ref`s stay inside it.
- `data_fields`: templates and expressions that read facts' attributes or their
  `data` are walked (`_datawalk`) against the key schemas; only those: a
  template the fast path analyses and that reads no `.data` or fact attribute
  costs one regular-expression search.
- `constant_data`: seed data and constant emit `data` match their key's schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, SourceSpan, did_you_mean
from converge_dsl.frontend._facts import PipelineFacts, TemplateSite

# A template the fast path accepts needs the walk only if it reads an attribute of one fact.
_FAST_READS_FACT = re.compile(
    r"\.\s*data\b|data_of\s*\(|fact\s*\(|\)\s*\.\s*[A-Za-z_]|item\s*\."
    r"|attribute\s*=\s*['\"](?!(?:id|key|content|confidence|provenance)['\"])|selectattr|rejectattr"
)
_READS_FACTS = re.compile(r"fact|data_of|item")
_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def key_schemas_valid(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Each key schema is valid JSON Schema 2020-12 and refers only within itself."""
    if not facts.key_schemas:
        return
    from converge_dsl.frontend._dataschema import remote_refs

    for i, key in enumerate(facts.data.get("keys", [])):
        schema = key.get("schema")
        if not isinstance(schema, dict):
            continue
        base: JsonPath = ("keys", i, "schema")
        for where in remote_refs(schema):
            yield facts.error(
                codes.KEY_SCHEMA_REMOTE_REF,
                f"key {key['name']!r}: {where[-1]} {_value(schema, where)!r} points outside the "
                "schema; references resolve only within the schema",
                (*base, *where),
                hint="move the definition under '$defs' and refer to it as '#/$defs/NAME'",
            )
        yield from _meta_errors(facts, key["name"], schema, base)


def _meta_errors(
    facts: PipelineFacts, name: str, schema: dict[str, Any], base: JsonPath
) -> Iterator[Diagnostic]:
    import jsonschema_rs

    if jsonschema_rs.meta.is_valid(schema):
        return
    import jsonschema

    meta = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    errors = sorted(meta.iter_errors(schema), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors:
        where = tuple(error.absolute_path)
        hint = "see https://json-schema.org/draft/2020-12/json-schema-validation"
        if where and where[-1] == "type":
            guess = did_you_mean(str(error.instance), _TYPES)
            hint = f"did you mean {guess!r}?" if guess else f"types: {', '.join(_TYPES)}"
        yield facts.error(
            codes.KEY_SCHEMA_INVALID,
            f"key {name!r}: the schema is not valid JSON Schema 2020-12 at "
            f"{_pointer(where)}: {_short(error.message)}",
            (*base, *where),
            hint=hint,
        )


def _value(schema: Any, where: tuple[str | int, ...]) -> Any:
    for part in where:
        schema = schema[part]
    return schema


def _pointer(where: tuple[Any, ...]) -> str:
    return "/" + "/".join(str(p) for p in where) if where else "/"


def _short(message: str) -> str:
    line = message.split("\n", 1)[0]
    return line if len(line) <= 100 else line[:97] + "..."


def data_fields(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Fact attributes and data fields that templates read exist (errors); literal warnings."""
    items = _item_shapes(facts)
    for site in facts.templates:
        item = _item_for(site, items)
        if not _needs_walk(site, item is not None):
            continue
        from converge_dsl.frontend._datawalk import Walker
        from converge_dsl.frontend._jinja_parse import parse

        ast, _ = parse(site.text, site.expression)
        if ast is None:
            continue  # templates_compile reports it
        for finding in Walker(facts.key_schemas, item).walk(ast):
            span = _locate(facts, site, finding.lineno, finding.needle)
            yield Diagnostic.at(
                finding.code,
                finding.message,
                span,
                path=site.path,
                hint=finding.hint,
                severity=finding.severity,
            )


def _needs_walk(site: TemplateSite, has_item: bool) -> bool:
    text = site.text
    if not site.expression and "{" not in text:
        return False
    if not _READS_FACTS.search(text):
        return False
    from converge_dsl.frontend._fastjinja import analyse

    if analyse(text, expression=site.expression) is None:
        return True  # Jinja parses it for the name checks anyway
    found = _FAST_READS_FACT.search(text)
    return found is not None and (has_item or not found.group().startswith("item"))


def _item_shapes(facts: PipelineFacts) -> dict[JsonPath, Any]:
    """llm suggestor output path -> the shape of its `item` (output.schema, else the key's)."""
    from converge_dsl.frontend._dataschema import DataShape

    shapes: dict[JsonPath, Any] = {}
    for path, s in facts.suggestors:
        if s.get("kind") != "llm":
            continue
        output = s.get("output", {})
        schema = output.get("schema")
        label = "item (output.schema)"
        if not isinstance(schema, dict):
            schema = facts.key_schemas.get(s.get("target", ""))
            label = f"item (key {s.get('target')!r} data)"
        if isinstance(schema, dict):
            shapes[(*path, "output")] = DataShape(schema, schema, label)
    return shapes


def _item_for(site: TemplateSite, items: Mapping[JsonPath, Any]) -> Any:
    return items.get(site.path[:-1]) if "item" in site.names else None


def _locate(facts: PipelineFacts, site: TemplateSite, lineno: int, needle: str) -> SourceSpan:
    """The span of `needle` on line `lineno` of the template (the field name, the literal)."""
    doc = facts.document
    if needle.startswith("."):
        candidates = [(needle, 1)]
    elif needle.startswith("["):
        word = needle[2:-2]
        candidates = [(f"['{word}']", 2), (f'["{word}"]', 2)]
    elif needle.startswith("'"):
        word = needle[1:-1]
        candidates = [(f"'{word}'", 0), (f'"{word}"', 0)]
    else:
        candidates = [(needle, 0)]
    whole = facts.source_map.span(site.path)
    # A folded scalar (`>`) joins its lines: Jinja's line 1 may be any line of the block.
    others = range(1, whole.end_line - whole.line + 2)
    for line in (lineno, *(n for n in others if n != lineno)):
        for text, skip in candidates:
            span = doc.template_span(site.path, line, text)
            if span.line == span.end_line and span.end_column - span.column == len(text):
                end = span.end_column - (skip if text.startswith("[") else 0)
                return SourceSpan(span.file, span.line, span.column + skip, span.line, end)
    return doc.template_span(site.path, lineno)


def constant_data(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Seed data and constant emitted data match their key's schema."""
    if not facts.key_schemas:
        return
    for i, seed in enumerate(facts.data.get("seeds", [])):
        if "data" in seed:
            yield from _check_data(facts, seed.get("key", "seeds"), seed["data"], ("seeds", i))
    for path, s in facts.suggestors:
        if s["kind"] == "seed":
            for j, fact in enumerate(s.get("facts", ())):
                if "data" in fact:
                    target = s.get("target", "seeds")
                    yield from _check_data(facts, target, fact["data"], (*path, "facts", j))
        for j, emit in enumerate(s.get("emit", ()) if s["kind"] == "rule" else ()):
            if isinstance(emit.get("data"), str):
                value = _constant(emit["data"])
                if value is not _NOT_CONSTANT:
                    where = (*path, "emit", j)
                    yield from _check_data(facts, emit["key"], value, where, in_yaml=False)


def _check_data(
    facts: PipelineFacts, key: str, value: Any, where: JsonPath, *, in_yaml: bool = True
) -> Iterator[Diagnostic]:
    validator = _validator(facts, key)
    if validator is None:
        return
    for error in validator.iter_errors(value):
        inside = tuple(error.instance_path)
        path = (*where, "data", *inside) if in_yaml else (*where, "data")
        yield facts.error(
            codes.DATA_NOT_VALID,
            f"data does not match the schema of key {key!r} at {_pointer(inside)}: "
            f"{_short(error.message)}",
            path,
            hint=f"the schema is under keys: (name: {key})",
        )


def _validator(facts: PipelineFacts, key: str) -> Any:
    """A validator for `key`'s schema; None when there is none or it is not usable."""
    import json

    schema = facts.key_schemas.get(key)
    if schema is None:
        return None
    from converge_dsl.frontend._dataschema import remote_refs

    if remote_refs(schema):
        return None
    return _compiled(json.dumps(schema, sort_keys=True))


@lru_cache(maxsize=64)
def _compiled(schema_text: str) -> Any:
    import json

    import jsonschema_rs

    schema = json.loads(schema_text)
    if not jsonschema_rs.meta.is_valid(schema):
        return None
    return jsonschema_rs.Draft202012Validator(schema)


class _NotConstant:
    pass


_NOT_CONSTANT = _NotConstant()


def _constant(text: str) -> Any:
    """The value of an expression made of literals only, else `_NOT_CONSTANT`."""
    from converge_dsl.frontend._jinja_parse import parse

    ast, _ = parse(text, True)
    if ast is None:
        return _NOT_CONSTANT
    from jinja2 import nodes

    def value(node: nodes.Node) -> Any:
        if isinstance(node, nodes.Const):
            return node.value
        if isinstance(node, nodes.List | nodes.Tuple):
            return [value(n) for n in node.items]
        if isinstance(node, nodes.Dict):
            out = {}
            for pair in node.items:
                k = value(pair.key)
                if not isinstance(k, str):
                    raise ValueError
                out[k] = value(pair.value)
            return out
        raise ValueError

    try:
        output = ast.body[0]
        return value(output.nodes[0])  # type: ignore[attr-defined]
    except ValueError:
        return _NOT_CONSTANT
