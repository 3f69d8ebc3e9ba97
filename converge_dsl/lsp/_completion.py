"""Completion: schema keys at any depth, then the names the pipeline declares where they fit.

- a key being typed: the properties the schema allows in that mapping (the
  suggestor's branch chosen by its `kind`), less those already written;
- a value: a context key where the schema wants one (`dependencies`,
  `target`, `emit[].key`, `keys` of contributors...), a model under `model`,
  the pipeline's suggestor names in a model script's `match.suggestor`, its
  invariants and inputs in a test file, pack names under `packs:` and their
  versions as specifiers, `PACK/SUGGESTOR` after `use:` (`_packs`, offline),
  else the values an `enum` allows;
- inside a template or expression: keys after `facts.`, `proposals.` and
  `count('` (`has`, `fact`, `data_of`), inputs after `inputs.`, the fields of
  the output schema after `item.` and of a key's schema after `data.`, allowed
  filters after `|`, else the names in scope there and the sandbox's globals.
"""

from __future__ import annotations

import re
from typing import Any

from lsprotocol import types as lsp

from converge_dsl.frontend import PipelineFacts
from converge_dsl.lsp import _names, _packs, _schema_nav
from converge_dsl.lsp._analysis import PIPELINE, SCRIPT, TEST
from converge_dsl.lsp._context import Context
from converge_dsl.lsp._lookup import Subject

Kind = lsp.CompletionItemKind
_KEY_DEFS = frozenset({"key", "keyList"})
_TEMPLATE_OPEN = re.compile(r"\{[{%](?!.*[}%]\})", re.S)
_TAIL = (
    ("keys", re.compile(r"\b(?:facts|proposals)\.(\w*)$")),
    ("keys", re.compile(r"\b(?:" + "|".join(_names.KEY_FUNCTIONS) + r")\(\s*['\"](\w*)$")),
    ("inputs", re.compile(r"\binputs\.(\w*)$")),
    ("item", re.compile(r"\bitem\.(\w*)$")),
    ("data", re.compile(r"\bdata\.(\w*)$")),
    ("filters", re.compile(r"\|\s*(\w*)$")),
    ("fields", re.compile(r"\.(\w*)$")),
    ("names", re.compile(r"(\w*)$")),
)
_MENTIONED = re.compile(
    r"(?:facts|proposals)\.(\w+)|(?:" + "|".join(_names.KEY_FUNCTIONS) + r")\(\s*['\"](\w+)"
)


def complete(subject: Subject, position: lsp.Position) -> list[lsp.CompletionItem]:
    """The completion items at `position` of the subject's file."""
    context = subject.context(position)
    if context is None:
        return []
    if context.on_key:
        return _schema_keys(subject, context)
    facts = subject.facts
    site = _template_site(facts, context)
    if site is not None:
        return _in_template(facts, context, *site)
    return _values(subject, context)


def _schema_keys(subject: Subject, context: Context) -> list[lsp.CompletionItem]:
    found = _schema_nav.at(subject.schema, context.parent, context.data)
    taken = context.siblings()
    offered = [
        (name, Kind.Property, _description(subject.schema, sub))
        for name, sub in found.properties().items()
    ]
    if subject.kind == PIPELINE and context.parent == ("packs",) and subject.facts is not None:
        offered += [
            (name, Kind.Module, about)
            for name, about in _packs.pack_names(subject.facts, subject.path)
        ]
    return [
        _item(name, kind, about, insert=f"{name}: ")
        for name, kind, about in offered
        if name not in taken and name.startswith(context.prefix)
    ]


def _description(root: dict[str, Any], schema: Any) -> str | None:
    """A property's description: its own, else that of what it refers to."""
    return _schema_nav.SchemaAt(list(_schema_nav.expand(root, schema)), set()).description()


def _values(subject: Subject, context: Context) -> list[lsp.CompletionItem]:
    found = _schema_nav.at(subject.schema, context.path, context.data)
    facts = subject.facts
    items: list[lsp.CompletionItem] = []
    if facts is not None:
        items.extend(_names_for(subject, context, found, facts))
    items.extend(
        _item(_yaml_value(v), Kind.EnumMember, found.description()) for v in found.values()
    )
    return [i for i in items if i.label.startswith(context.prefix)]


def _names_for(
    subject: Subject, context: Context, found: _schema_nav.SchemaAt, facts: PipelineFacts
) -> list[lsp.CompletionItem]:
    kind, path = subject.kind, context.path
    last = next((step for step in reversed(path) if isinstance(step, str)), "")
    if kind == PIPELINE and len(path) == 2 and path[0] == "packs":
        offers = _packs.specifiers(facts, subject.path, str(path[1]))
        return [_item(text, Kind.Value, about) for text, about in offers]
    if kind == PIPELINE and path[:1] == ("suggestors",) and path[2:] == ("use",):
        return [
            _item(use, Kind.Function, about)
            for use, about in _packs.uses(facts, subject.path, subject.server.environ)
        ]
    if kind == PIPELINE and found.definitions & _KEY_DEFS:
        return key_items(facts)
    if kind == PIPELINE and last == "model":
        return [_item(name, Kind.Class, "model") for name in sorted(facts.models)]
    if kind == SCRIPT and last == "suggestor":
        return [_item(s.name, Kind.Function, f"{s.kind} suggestor") for s in facts.specs]
    if kind == TEST and "invariants" in path:
        return [
            _item(v.name, Kind.Event, f"{v.klass} invariant") for v in facts.manifest.invariants
        ]
    return []


def key_items(facts: PipelineFacts) -> list[lsp.CompletionItem]:
    """Every context key of the pipeline: the built-in keys and those declared."""
    declared = {k.name: k for k in facts.manifest.keys}
    items = []
    for name in sorted(facts.declared_keys):
        spec = declared.get(name)
        about = "built-in context key" if spec is None else (spec.description or "context key")
        items.append(_item(name, Kind.Field, about))
    return items


def _template_site(
    facts: PipelineFacts | None, context: Context
) -> tuple[bool, frozenset[str]] | None:
    """(an expression, the names in scope) when the cursor is in a template or expression."""
    if facts is not None:
        for site in facts.templates:
            if site.path == context.path:
                return site.expression, site.names
    last = context.path[-1] if context.path else None
    if last in ("when", "check"):
        return True, _names.CONTEXT_NAMES
    if _TEMPLATE_OPEN.search(context.prefix):
        return False, _names.CONTEXT_NAMES
    return None


def _in_template(
    facts: PipelineFacts | None, context: Context, expression: bool, names: frozenset[str]
) -> list[lsp.CompletionItem]:
    prefix = context.prefix
    if not expression and not _TEMPLATE_OPEN.search(prefix):
        return []
    for what, pattern in _TAIL:
        match = pattern.search(prefix)
        if match is None:
            continue
        word = match.group(1)
        items = _template_items(what, facts, context, names)
        if items is not None:
            return [i for i in items if i.label.startswith(word)]
    return []


def _template_items(
    what: str, facts: PipelineFacts | None, context: Context, names: frozenset[str]
) -> list[lsp.CompletionItem] | None:
    if what == "filters":
        return [_item(f, Kind.Function, "filter") for f in sorted(_names.ALLOWED_FILTERS)]
    if what == "names":
        scope = sorted(names | _names.globals_names())
        return [_item(n, Kind.Variable, "in scope here") for n in scope]
    if what == "fields":
        return [_item(f, Kind.Field, "a fact's field") for f in _names.FACT_FIELDS]
    if facts is None:
        return []
    if what == "keys":
        return key_items(facts)
    if what == "inputs":
        return [_item(n, Kind.Variable, "input") for n in sorted(facts.inputs)]
    if what == "item":
        return _fields(_item_schema(facts, context))
    return _fields(*_mentioned_schemas(facts, context))


def _item_schema(facts: PipelineFacts, context: Context) -> Any:
    for spec in facts.specs:
        items = spec.items()
        if items is not None and context.path[: len(items[0])] == items[0]:
            schema = items[1]
            if schema is not None:
                return schema
            return facts.key_schemas.get(spec.targets[0]) if spec.targets else None
    return None


def _mentioned_schemas(facts: PipelineFacts, context: Context) -> list[Any]:
    """The schemas of the keys the template names before the cursor (the nearest first),
    else of the suggestor's dependencies."""
    named = [a or b for a, b in _MENTIONED.findall(context.prefix)]
    if not named:
        spec = next((s for s in facts.specs if context.path[: len(s.path)] == s.path), None)
        named = list(spec.dependencies) if spec is not None else []
    schemas = [facts.key_schemas[k] for k in reversed(named) if k in facts.key_schemas]
    return schemas[:1] if schemas else []


def _fields(*schemas: Any) -> list[lsp.CompletionItem]:
    found: dict[str, lsp.CompletionItem] = {}
    for schema in schemas:
        for name, sub in _schema_nav.data_fields(schema).items():
            found.setdefault(name, _item(name, Kind.Field, _describe_field(sub)))
    return list(found.values())


def _describe_field(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "data field"
    kind = schema.get("type") or ("enum" if "enum" in schema else "value")
    return f"data field ({kind})"


def _yaml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _item(
    label: str, kind: lsp.CompletionItemKind, detail: str | None, insert: str | None = None
) -> lsp.CompletionItem:
    return lsp.CompletionItem(label=label, kind=kind, detail=detail, insert_text=insert)
