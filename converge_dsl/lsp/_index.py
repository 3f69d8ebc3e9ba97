"""The pipeline's names and every place they are written: keys, suggestors, models, inputs.

Everything is read from the analysis `validate` made (the facts' specs, key
references, model references and template sites) and located through the
loader's source map; a name inside a template or expression is located by
`LoadedDocument.offset_span` (the source text of each character of the value,
a name written with escapes included), else by `template_span` on its line of the
value and kept only where the file's text is the name. A model script's
`match.suggestor` and a test file's invariants and inputs are read from those files
loaded by the same loader.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.frontend import LoadedDocument, PipelineFacts
from converge_dsl.frontend.document import value_at
from converge_dsl.lsp import _names

KEY, SUGGESTOR, MODEL, INPUT, INVARIANT = "key", "suggestor", "model", "input", "invariant"
_FUNCTIONS = "|".join(_names.KEY_FUNCTIONS)


def mention_patterns(kind: str, name: str) -> list[re.Pattern[str]]:
    """Where a template or expression names `name` (group 1 is the name)."""
    word = re.escape(name)
    if kind == KEY:
        return [
            re.compile(rf"\b(?:facts|proposals)\.({word})\b"),
            re.compile(rf"\b(?:{_FUNCTIONS})\(\s*['\"]({word})['\"]"),
        ]
    if kind == INPUT:
        return [re.compile(rf"\binputs\.({word})\b")]
    return []


class Place:
    """One occurrence of a name: the file, its span (the name's text only), and whether it is
    where the name is defined."""

    __slots__ = ("defines", "path", "span")

    def __init__(self, path: Path, span: SourceSpan, defines: bool = False) -> None:
        self.path = path
        self.span = span
        self.defines = defines

    def __repr__(self) -> str:
        return f"Place({self.path.name}:{self.span.line}:{self.span.column}, {self.defines})"


def name_span(document: LoadedDocument, path: JsonPath, on_key: bool = False) -> SourceSpan:
    """The span of the text of a scalar (quotes left out) or of a mapping key."""
    location = document.source_map.locate(path)
    span = location.key_span if on_key and location.key_span is not None else location.span
    if span.line != span.end_line:
        return span
    text = document.line(span.line)[span.column - 1 : span.end_column - 1]
    # A node's span starts at its anchor or tag (`&name`, `!tag`): the name is after them.
    properties = _PROPERTIES.match(text)
    skip = properties.end() if properties else 0
    start, text = span.column + skip, text[skip:]
    quoted = len(text) > 1 and text[:1] in ("'", '"') and text[-1:] == text[:1]
    if quoted:
        return SourceSpan(span.file, span.line, start + 1, span.end_line, span.end_column - 1)
    return SourceSpan(span.file, span.line, start, span.end_line, span.end_column)


_PROPERTIES = re.compile(r"(?:[&!][^\s]*\s+)*")


def mentions(
    document: LoadedDocument, facts: PipelineFacts, kind: str, name: str
) -> Iterator[tuple[JsonPath, SourceSpan]]:
    """Each place a template or expression names `name` (of `kind`): the source text of the
    name, aligned with the template's value (`offset_span`), so a name written with escapes
    in a double-quoted string (`facts.t\\x69ckets`) is that escaped text; else where the
    file writes the name as it is on its line of the value. A mention found at neither is
    left out, as no place of the file can be said to hold it."""
    patterns = mention_patterns(kind, name)
    if not patterns:
        return
    for site in facts.templates:
        text = site.text
        for pattern in patterns:
            for match in pattern.finditer(text):
                start, end = match.start(1), match.end(1)
                span = document.offset_span(site.path, text, start, end)
                if span is None:  # not aligned: the name on its line of the value
                    lineno = text.count("\n", 0, start) + 1
                    span = document.template_span(site.path, lineno, name)
                    if not _holds(document, span, name):
                        continue
                yield site.path, span


def _holds(document: LoadedDocument, span: SourceSpan, name: str) -> bool:
    """Whether the file's text at `span` is `name` as a whole word (`template_span` answers a
    line of the template when it does not find the name on it)."""
    line = document.line(span.line)
    start, end = span.column - 1, span.end_column - 1
    if span.line != span.end_line or line[start:end] != name:
        return False
    return not (_word(line[start - 1 : start]) or _word(line[end : end + 1]))


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def places(
    path: Path, document: LoadedDocument, facts: PipelineFacts, kind: str, name: str
) -> list[Place]:
    """Every occurrence of `name` in the pipeline: definitions first."""
    found: list[Place] = []
    for where, on_key, defines in _paths(facts, kind, name):
        found.append(Place(path, name_span(document, where, on_key), defines))
    found.extend(Place(path, span) for _, span in mentions(document, facts, kind, name))
    return found


def _paths(facts: PipelineFacts, kind: str, name: str) -> Iterator[tuple[JsonPath, bool, bool]]:
    """(JSON path, on the key, a definition) of each structural occurrence."""
    manifest = facts.manifest
    if kind == KEY:
        for declared in manifest.keys:
            if declared.name == name:
                yield (*declared.path, "name"), False, True
        for where, key in facts.key_references:
            if key == name:
                yield where, False, False
    elif kind == SUGGESTOR:
        for spec in facts.specs:
            if spec.name == name:
                yield (*spec.path, "name"), False, True
    elif kind == MODEL:
        if name in manifest.models:
            yield ("models", name), True, True
        for spec in facts.specs:
            for where, model in spec.model_references():
                if model == name:
                    yield where, False, False
    elif kind == INPUT:
        if name in manifest.inputs:
            yield ("inputs", name), True, True
    elif kind == INVARIANT:
        for invariant in manifest.invariants:
            if invariant.name == name:
                yield (*invariant.path, "name"), False, True


def writers(facts: PipelineFacts, key: str) -> list[tuple[str, JsonPath]]:
    """(label, path of its key or name) of the seeds and suggestors that write `key`."""
    found: list[tuple[str, JsonPath]] = [
        (f"seed {seed.get('id')!r}", ("seeds", index, "key" if "key" in seed else "id"))
        for index, seed in enumerate(facts.data.get("seeds") or ())
        if seed.get("key", "seeds") == key
    ]
    found += [(spec.name, (*spec.path, "name")) for spec in facts.specs if key in spec.targets]
    return found


def readers(facts: PipelineFacts, key: str) -> list[str]:
    """The suggestors that depend on `key` or name it in a template or expression."""
    patterns = mention_patterns(KEY, key)
    found = []
    for spec in facts.specs:
        texts = [site.text for site in spec.templates()]
        if key in spec.dependencies or any(p.search(t) for p in patterns for t in texts):
            found.append(spec.name)
    return found


def script_matches(document: LoadedDocument, name: str) -> Iterator[JsonPath]:
    """The `rules[i].match.suggestor` paths of a model script that name `name`."""
    for index, rule in enumerate(value_at(document.data, ("rules",)) or ()):
        if isinstance(rule, dict) and value_at(rule, ("match", "suggestor")) == name:
            yield ("rules", index, "match", "suggestor")


def test_references(
    document: LoadedDocument, kind: str, name: str
) -> Iterator[tuple[JsonPath, bool]]:
    """(path, on the key) of each place a test file names `name`: a key in an expectation
    (`facts`, `absent`, `counts`, `snapshot`), an invariant expected, an input given, a
    model replaced, a suggestor matched by an inline rule; at the file's level and each case's."""
    bases: list[JsonPath] = [()]
    for index, case in enumerate(value_at(document.data, ("cases",)) or ()):
        if isinstance(case, dict):
            bases.append(("cases", index))
    for base in bases:
        yield from _named_in(document, base, kind, name)


def _named_in(
    document: LoadedDocument, base: JsonPath, kind: str, name: str
) -> Iterator[tuple[JsonPath, bool]]:
    """The places under `base` (the file, or one case) that name `name`."""
    where = value_at(document.data, base)
    if not isinstance(where, dict):
        return
    expect = _mapping(where.get("expect"))
    if kind == KEY:
        for field in ("facts", "absent"):
            for j, item in enumerate(_list(expect.get(field))):
                if isinstance(item, dict) and item.get("key") == name:
                    yield (*base, "expect", field, j, "key"), False
        for field in ("counts", "snapshot"):
            if name in _mapping(expect.get(field)):
                yield (*base, "expect", field, name), True
    elif kind == INVARIANT:
        for j, item in enumerate(_list(expect.get("invariants"))):
            if item == name:
                yield (*base, "expect", "invariants", j), False
    elif kind == INPUT:
        if isinstance(where.get("inputs"), dict) and name in where["inputs"]:
            yield (*base, "inputs", name), True
    elif kind == MODEL:
        if isinstance(where.get("models"), dict) and name in where["models"]:
            yield (*base, "models", name), True
    elif kind == SUGGESTOR:
        for model, replacement in _mapping(where.get("models")).items():
            for j, rule in enumerate(_list(_mapping(replacement).get("rules"))):
                if isinstance(rule, dict) and value_at(rule, ("match", "suggestor")) == name:
                    yield (*base, "models", model, "rules", j, "match", "suggestor"), False


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}
