"""Semantic checks of structured data: key schemas, data fields read by templates, constant data.

- `key_schemas_valid`: every `keys[].schema` is a JSON Schema 2020-12 whose
  `$ref`s stay inside it and whose regexes run on RE2 (`converge_dsl.sandbox`);
  every schema a suggestor applies to data (an llm `output.schema`) too.
- `data_fields`: templates and expressions that mention facts, `data_of` or
  `item` are walked (`_datawalk`) against the key schemas, on the fast path's
  tree when it accepts the text (no jinja2 import), else on Jinja's (parsed
  once, shared with the name checks); a finding's caret is placed on the text it
  names (a string literal's from the template's literals as Jinja's lexer reads
  them, once per template).
- `constant_data`: seed data and constant emit `data` match their key's schema.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl.diagnostics import Diagnostic, JsonPath, SourceSpan, did_you_mean, suggestion
from converge_dsl.frontend._facts import PipelineFacts
from converge_dsl.frontend._kinds import TemplateSite

if TYPE_CHECKING:
    from converge_dsl.frontend._datawalk import Finding, Reads

_READS_FACTS = re.compile(r"fact|proposals|data_of|item")
_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def key_schemas_valid(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Each key schema, and each schema a suggestor applies to data (an llm
    `output.schema`), is valid JSON Schema 2020-12, within the size limits, refers only
    within itself and has RE2 regexes."""
    for spec in facts.specs:
        for label, where, schema in spec.schemas():
            unsafe = list(_unsafe(facts, label, schema, where))
            yield from unsafe
            if isinstance(schema, dict) and not _too_large(unsafe):
                yield from _meta_errors(facts, label, schema, where)
    if not facts.key_schemas:
        return
    for key in facts.manifest.keys:
        schema = key.schema
        if not isinstance(schema, dict):
            continue
        base: JsonPath = (*key.path, "schema")
        unsafe = list(_unsafe(facts, f"key {quoted(key.name)}", schema, base))
        yield from unsafe
        if not _too_large(unsafe):
            yield from _meta_errors(facts, f"key {quoted(key.name)}", schema, base)


def _too_large(found: list[Diagnostic]) -> bool:
    """Whether a schema crossed a size limit: it is then not read against the meta-schema."""
    return any(d.code == codes.SCHEMA_TOO_LARGE for d in found)


_UNSAFE_HINTS = {
    "ref": "move the definition under '$defs' and refer to it as '#/$defs/NAME'",
    "regex": "regexes run on RE2, in linear time: no backreferences or lookaround",
    "size": "make the schema smaller: the limits of schemas are in the reference",
    "dangling": "refer to a definition the schema has, as '#/$defs/NAME'",
}


# Words whose absence from a schema's text means `schema_problems` finds nothing in it
# (`Ref` is in `$dynamicRef` and `$recursiveRef`, `attern` in both regex keywords).
_SCANNED = ("$ref", "Ref", "attern")


def _unsafe(facts: PipelineFacts, what: str, schema: Any, base: JsonPath) -> Iterator[Diagnostic]:
    """A located error per limit `schema` crosses, per `$ref` outside it and per regex
    RE2 cannot run."""
    from converge_dsl.sandbox import size_problems

    text = str(schema)
    if not size_problems(schema) and not any(word in text for word in _SCANNED):
        return  # the cheap common case: nothing to check
    from converge_dsl.sandbox import PROBLEM_CODES, schema_problems

    for where, kind, message in schema_problems(schema):
        yield facts.error(
            PROBLEM_CODES[kind], f"{what}: {message}", (*base, *where), hint=_UNSAFE_HINTS[kind]
        )


def _meta_errors(
    facts: PipelineFacts, what: str, schema: dict[str, Any], base: JsonPath
) -> Iterator[Diagnostic]:
    """A located error per place where `schema` (`what`: "key 'K'", "output.schema")
    breaks the JSON Schema 2020-12 meta-schema (CD109)."""
    from converge_dsl.sandbox import meta_error

    if meta_error(schema) is None:  # its `$schema`'s draft; nothing fetched
        return
    import jsonschema

    meta = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    errors = sorted(meta.iter_errors(schema), key=lambda e: [str(p) for p in e.absolute_path])
    said: set[tuple[tuple[Any, ...], str]] = set()
    for error in errors:
        where = tuple(error.absolute_path)
        if (where, error.message) in said:
            continue  # one place reached by several paths of the meta-schema
        said.add((where, error.message))
        hint = "see https://json-schema.org/draft/2020-12/json-schema-validation"
        if where and where[-1] == "type":
            guess = did_you_mean(str(error.instance), _TYPES)
            hint = suggestion(guess) if guess else f"types: {', '.join(_TYPES)}"
        yield facts.error(
            codes.KEY_SCHEMA_INVALID,
            f"{what}: the schema is not valid JSON Schema 2020-12 at "
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
    sites = [
        site
        for site in facts.templates
        if (site.expression or "{" in site.text) and _READS_FACTS.search(site.text)
    ]
    if not sites:
        return  # before importing the walker: most pipelines' templates read no fact
    from converge_dsl.frontend._datawalk import Walker
    from converge_dsl.frontend._fastjinja import parsed

    items = _item_shapes(facts)
    # Expressions that differ only outside their `{{ }}` blocks, or not at all, are walked once.
    walked: dict[tuple[int, tuple[object, ...], int], tuple[list[Finding], Reads]] = {}
    for site in sites:
        item = _item_for(site, items)
        trees = parsed(site.text, expression=site.expression)
        if trees is not None:
            findings: list[Finding] = []
            before: Reads = {}  # the reads of the site's earlier expressions, by line
            for lineno, tree, literals in trees:
                key = (id(tree), literals, id(item))
                if key not in walked:
                    walker = Walker(facts.key_schemas, item)
                    walked[key] = (walker.walk_expressions(((1, tree, literals),)), walker.reads)
                found, reads = walked[key]
                for f in found:
                    line = f.lineno + lineno - 1
                    earlier = before.get((line, f.needle), 0)
                    findings.append(f._replace(lineno=line, occurrence=f.occurrence + earlier))
                for (line, needle), count in reads.items():
                    place = (line + lineno - 1, needle)
                    before[place] = before.get(place, 0) + count
        else:
            from converge_dsl.frontend._jinja_parse import parse

            ast, _ = parse(site.text, site.expression)
            if ast is None:
                continue  # templates_compile reports it
            findings = Walker(facts.key_schemas, item).walk(ast)
        locate = _Locator(facts, site)
        for finding in findings:
            yield Diagnostic.at(
                finding.code,
                finding.message,
                locate(finding.lineno, finding.needle, finding.occurrence),
                path=site.path,
                hint=finding.hint,
                severity=finding.severity,
            )


def _item_shapes(facts: PipelineFacts) -> dict[JsonPath, Any]:
    """llm suggestor output path -> the shape of its `item` (output.schema, else the key's)."""
    from converge_dsl.frontend._dataschema import DataShape, item_schema

    shapes: dict[JsonPath, Any] = {}
    for spec in facts.specs:
        items = spec.items()
        if items is None:
            continue  # no item, or a text one
        where, schema = items
        if schema is not None:
            node = item_schema(schema)  # output.schema checks the whole answer
            if node is not None:
                source = f"output.schema of {quoted(spec.name)}"
                shapes[where] = DataShape(schema, node, "item (output.schema)", source)
            continue
        target = spec.targets[0] if spec.targets else ""
        schema = facts.key_schemas.get(target)
        if isinstance(schema, dict):
            named = quoted(target)
            label, source = f"item (key {named} data)", f"the schema of key {named}"
            shapes[where] = DataShape(schema, schema, label, source)
    return shapes


def _item_for(site: TemplateSite, items: Mapping[JsonPath, Any]) -> Any:
    return items.get(site.path[:-1]) if "item" in site.names else None


# (start, end) of a finding's text in its template, and the end of its first literal
# (joined literals, marked by the first alone when they cross a line of the file)
_Mark = tuple[int, int, int]


class _Locator:
    """Where each finding of one template is: the span of its `needle` (`.field`,
    `[field`, a literal, a bare field name), its `occurrence`-th from its line on,
    counted from 0 (the last found when there are fewer; a folded scalar joins lines:
    then the first anywhere), mapped through the source map; the field name or the
    literal is marked (`[field`: the subscript's literal, or its joined literals, that
    make `field`). The marks of a (line, needle) are found once, as far as a finding
    asks, and the first anywhere once per needle, so n findings of one line read it
    once, not n times."""

    def __init__(self, facts: PipelineFacts, site: TemplateSite) -> None:
        self.facts = facts
        self.site = site
        self.starts = [0]  # the offset of each line's start, as far as read
        # (line, needle) -> its marks found so far, and the search that finds the rest
        self.found: dict[tuple[int, str], tuple[list[_Mark], Iterator[_Mark]]] = {}
        self.anywhere: dict[str, _Mark | None] = {}  # needle -> its first mark, if any
        self.literals: dict[str, list[tuple[int, int]]] | None = None  # read once, if asked

    def __call__(self, lineno: int, needle: str, occurrence: int) -> SourceSpan:
        text, path, document = self.site.text, self.site.path, self.facts.document
        while len(self.starts) < lineno:
            self.starts.append(text.find("\n", self.starts[-1]) + 1 or len(text))
        if (lineno, needle) not in self.found:
            self.found[lineno, needle] = ([], self.marks(needle, self.starts[lineno - 1]))
        marks, rest = self.found[lineno, needle]
        marks.extend(islice(rest, max(0, occurrence + 1 - len(marks))))
        if marks:
            mark: _Mark | None = marks[min(occurrence, len(marks) - 1)]
        else:
            if needle not in self.anywhere:
                self.anywhere[needle] = next(self.marks(needle, 0), None)
            mark = self.anywhere[needle]
        if mark is None:
            return document.template_span(path, lineno)
        return document.joined_span(path, text, *mark)

    def marks(self, needle: str, begin: int) -> Iterator[_Mark]:
        """Where `needle` is from `begin` on, in order: a string literal's from the
        template's literals, read once (`_jinja_strings.literal_spans`), the rest by
        `_marks`."""
        if not needle.startswith("'"):
            return _marks(self.site.text, needle, begin)
        if self.literals is None:
            from converge_dsl.frontend._jinja_strings import literal_spans

            self.literals = literal_spans(self.site.text, expression=self.site.expression)
        spans = self.literals.get(needle[1:-1], [])
        first = bisect.bisect_left(spans, begin, key=lambda span: span[0])
        return ((start, end, end) for start, end in spans[first:])


@functools.cache
def _number_tokens() -> re.Pattern[str]:
    """Jinja's own number tokens (its lexer's `float_re`, tried first, and `integer_re`),
    each standing alone."""
    from jinja2.lexer import float_re, integer_re

    return re.compile(
        rf"(?<![\w.])(?:(?P<float>{float_re.pattern})|(?P<integer>{integer_re.pattern}))(?![\w.])",
        float_re.flags,
    )


_WORDS = {"=True": "true|True", "=False": "false|False", "=None": "none|None"}


def _marks(text: str, needle: str, begin: int) -> Iterator[_Mark]:
    """Where `needle` is in `text` from `begin` on, in order (see `_Locator`)."""
    if needle.startswith("["):
        from converge_dsl.frontend import _joined_keys

        for bracket in re.compile(r"\[").finditer(text, begin):
            found = _joined_keys.span(text, bracket.end(), needle[1:])
            if found is not None:
                yield found
        return
    if needle.startswith("=") and needle not in _WORDS:
        yield from _numbers(text, needle[1:], begin)
        return
    if needle.startswith("."):
        pattern = rf"\.\s*(?P<mark>{re.escape(needle[1:])})(?!\w)"
    else:
        written = _WORDS.get(needle) or re.escape(needle)
        pattern = rf"(?<![\w])(?P<mark>{written})(?![\w])"
    for match in re.compile(pattern).finditer(text, begin):
        yield (*match.span("mark"), match.end("mark"))


def _numbers(text: str, value: str, begin: int) -> Iterator[_Mark]:
    """Where the number `value` (`str` of Jinja's value) is written from `begin` on, as
    Jinja reads its number tokens: `2.50` is 2.5, `1_0` and `0xa` are 10."""
    want: float = float(value) if "." in value or "e" in value else int(value)
    for match in _number_tokens().finditer(text, begin):
        written = match[0].replace("_", "")
        found = float(written) if match["float"] else int(written, 0)
        if type(found) is type(want) and found == want:
            yield (*match.span(), match.end())


def constant_data(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Seed data and constant emitted data match their key's schema."""
    if not facts.key_schemas:
        return
    validators = {key: _validator(schema) for key, schema in facts.key_schemas.items()}

    def check(key: str, value: Any, where: JsonPath, in_yaml: bool = True) -> Iterator[Diagnostic]:
        validator = validators.get(key)
        if validator is not None and not validator.is_valid(value):
            yield from _data_errors(facts, validator, key, value, where, in_yaml=in_yaml)

    for i, seed in enumerate(facts.data.get("seeds", [])):
        if "data" in seed:
            yield from check(seed.get("key", "seeds"), seed["data"], ("seeds", i))
    for site in (site for spec in facts.specs for site in spec.data_sites()):
        if not site.expression:
            yield from check(site.key, site.value, site.path)
        elif validators.get(site.key) is not None:
            value = _constant(site.value)
            if value is not _NOT_CONSTANT:
                yield from check(site.key, value, site.path, in_yaml=False)


def _data_errors(
    facts: PipelineFacts, validator: Any, key: str, value: Any, where: JsonPath, *, in_yaml: bool
) -> Iterator[Diagnostic]:
    for error in validator.iter_errors(value):
        inside = tuple(error.instance_path)
        path = (*where, "data", *inside) if in_yaml else (*where, "data")
        yield facts.error(
            codes.DATA_NOT_VALID,
            f"data does not match the schema of key {quoted(key)} at {_pointer(inside)}: "
            f"{_short(error.message)}",
            path,
            hint=f"the schema is under keys: (name: {key})",
        )


def _validator(schema: Any) -> Any:
    """A validator for a key schema; None when it is not usable (invalid, refused)."""
    import jsonschema_rs

    from converge_dsl.sandbox import UnsafeSchema, fast_validator, meta_error

    if meta_error(schema) is not None:
        return None
    try:
        return fast_validator(schema)
    except (UnsafeSchema, ValueError, jsonschema_rs.ReferencingError):  # a draft it lacks
        return None


class _NotConstant:
    pass


_NOT_CONSTANT = _NotConstant()


def constant(text: str, otherwise: Any) -> Any:
    """The value of an expression made of literals only, else `otherwise`."""
    value = _constant(text)
    return otherwise if value is _NOT_CONSTANT else value


def _constant(text: str) -> Any:
    """The value of an expression made of literals only, else `_NOT_CONSTANT`."""
    from converge_dsl.frontend._datawalk import Walker
    from converge_dsl.frontend._fastjinja import parsed

    walker = Walker({})
    trees = parsed(text, expression=True)
    if trees is not None:
        _, tree, walker.literals = trees[0]
    else:
        from converge_dsl.frontend._jinja_parse import parse

        ast, _ = parse(text, True)
        if ast is None:
            return _NOT_CONSTANT
        tree = ast.body[0].nodes[0]  # type: ignore[attr-defined]
    try:
        return _literal_value(tree, walker)
    except ValueError:
        return _NOT_CONSTANT


def _literal_value(node: Any, walker: Any) -> Any:
    """The JSON value of a literal tree (Jinja's or the fast path's); ValueError otherwise."""
    kind = type(node).__name__
    if kind == "Const":
        return walker.const(node)
    if kind in ("List", "Tuple"):
        return [_literal_value(item, walker) for item in node.items]
    if kind == "Dict":
        out: dict[str, Any] = {}
        for pair in node.items:
            key = _literal_value(pair.key, walker)
            if not isinstance(key, str):
                raise ValueError(key)
            out[key] = _literal_value(pair.value, walker)
        return out
    raise ValueError(kind)
