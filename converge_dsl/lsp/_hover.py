"""Hover: what the schema says of a key; for a context key, its schema and who writes and
reads it; for a suggestor, its kind, reads, writes and models; for a model, input or
invariant, its declaration; for a diagnostic under the cursor, `explain`'s text of its code."""

from __future__ import annotations

import json
import re

from lsprotocol import types as lsp

from converge_dsl.frontend import PipelineFacts
from converge_dsl.lsp import _index, _schema_nav
from converge_dsl.lsp._index import INPUT, INVARIANT, KEY, MODEL, SUGGESTOR
from converge_dsl.lsp._lookup import Subject
from converge_dsl.lsp._navigate import pipeline_of, symbol_at
from converge_dsl.lsp._positions import path_at

_CODE = re.compile(r"\bCD\d{3}\b")
_SCHEMA_LINES = 30


def hover(subject: Subject, position: lsp.Position) -> lsp.Hover | None:
    parts = [p for p in (_about_symbol(subject, position), _about_key(subject, position)) if p]
    parts = parts[:1]
    parts.extend(_about_codes(subject, position))
    if not parts:
        return None
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, "\n\n---\n\n".join(parts)))


def _about_symbol(subject: Subject, position: lsp.Position) -> str | None:
    symbol = symbol_at(subject, position)
    pipeline = pipeline_of(subject)
    if symbol is None or pipeline is None:
        return None
    kind, name = symbol
    facts = pipeline[2]
    if kind == KEY:
        return describe_key(facts, name) if name in facts.declared_keys else None
    if kind == SUGGESTOR:
        return _suggestor(facts, name)
    if kind == MODEL and name in facts.manifest.models:
        model = facts.manifest.models[name]
        details = "".join(f"\n- {field}: `{value}`" for field, value in model.details)
        return f"**model `{name}`** ({model.adapter} adapter){details}"
    if kind == INPUT and name in facts.manifest.inputs:
        spec = facts.manifest.inputs[name]
        default = spec.default if spec.has_default else None
        text = f"**input `{name}`**"
        text += f"\n\n{spec.description}" if spec.description else ""
        return text + (f"\n\ndefault: `{default}`" if default is not None else "")
    if kind == INVARIANT:
        for invariant in facts.manifest.invariants:
            if invariant.name == name:
                return f"**invariant `{name}`** ({invariant.klass})\n\n`{invariant.check}`"
    return None


def describe_key(facts: PipelineFacts, name: str) -> str:
    """A context key: its description and schema, the suggestors that write and read it."""
    declared = {k.name: k for k in facts.manifest.keys}
    spec = declared.get(name)
    lines = [f"**context key `{name}`**" + ("" if spec else " (built in)")]
    if spec is not None and spec.description:
        lines.append(spec.description)
    schema = facts.key_schemas.get(name)
    if schema is not None:
        text = json.dumps(schema, indent=2).split("\n")
        shown = text[:_SCHEMA_LINES] + (["..."] if len(text) > _SCHEMA_LINES else [])
        lines.append("schema:\n```json\n" + "\n".join(shown) + "\n```")
    writers = [label for label, _ in _index.writers(facts, name)]
    lines.append("written by: " + (", ".join(writers) or "nothing"))
    lines.append("read by: " + (", ".join(_index.readers(facts, name)) or "nothing"))
    return "\n\n".join(lines)


def _suggestor(facts: PipelineFacts, name: str) -> str | None:
    for spec in facts.specs:
        if spec.name == name:
            lines = [f"**suggestor `{name}`** ({spec.kind})"]
            if spec.description is not None:
                lines.append(spec.description)
            lines.append(
                "reads: " + (", ".join(spec.dependencies) or "nothing (always a candidate)")
            )
            lines.append("writes: " + (", ".join(spec.targets) or "nothing"))
            models = sorted(spec.models_used())
            if models:
                lines.append("models: " + ", ".join(models))
            lines.extend(f"{label}: {value}" for label, value in spec.details())
            return "\n\n".join(lines)
    return None


def _about_key(subject: Subject, position: lsp.Position) -> str | None:
    """The schema's description of the mapping key under the cursor."""
    document = subject.own_document
    if document is None:
        return None
    hit = path_at(document, subject.point(position))
    if not hit.on_key:
        return None
    found = _schema_nav.at(subject.schema, hit.path, document.data)
    text = found.description()
    return f"**{hit.path[-1]}**\n\n{text}" if text else None


def _about_codes(subject: Subject, position: lsp.Position) -> list[str]:
    """`explain`'s text of each diagnostic under the cursor, and of a code written there."""
    codes: list[str] = []
    for diagnostic in subject.server.state.published(subject.path):
        start, end = diagnostic.range.start, diagnostic.range.end
        if (start.line, start.character) <= (position.line, position.character) <= (
            end.line,
            end.character,
        ) and isinstance(diagnostic.code, str):
            codes.append(diagnostic.code)
    line = subject.lines.editor_line(position.line)
    for match in _CODE.finditer(line):
        if match.start() <= position.character <= match.end():
            codes.append(match.group(0))
    texts = (subject.server.explain(code) for code in dict.fromkeys(codes))
    return [text for text in texts if text]
