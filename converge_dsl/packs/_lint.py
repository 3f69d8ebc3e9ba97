"""Compile-time checks of a pack's templates, located in the pack's own files.

`template_diagnostics(pack)` parses every template and expression of the
pack's rule/llm/agent suggestors (prompt files included) with the pipeline's
own checker (`converge_dsl.frontend.template_problems`): syntax
errors, unknown names (templates see the pipeline's names plus `params`) and
unknown filters, each located in `pack.yaml` or in the prompt file, named
`DISPLAY/RELATIVE` (`Pack.display`). `pack publish` refuses a pack with any;
`validate` runs it for the pack suggestors a pipeline uses, adding what only
the pipeline knows: its declared inputs and context keys (those the templates
write, and those they read: CD250, at the key inside the template).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, SourceSpan, did_you_mean, suggestion
from converge_dsl.frontend import (
    KINDS,
    LoadedDocument,
    NodeLocation,
    SourceMap,
    TemplateSite,
    template_problems,
    unknown_reads,
)
from converge_dsl.packs._manifest import Pack
from converge_dsl.sandbox import CONTEXT_NAMES

PARAMS = frozenset({"params"})
# The kinds a pack template may be of: the front end's and the agent, named by
# reference so that packs import nothing of agents (docs/architecture.md §10).
TEMPLATE_KINDS = KINDS.with_kinds({"agent": "converge_dsl.agents._kind:AGENT"})


def _text_document(file: str, text: str) -> LoadedDocument:
    """A plain text file (a prompt file) as a document whose root is the whole text."""
    lines = text.splitlines() or [""]
    span = SourceSpan(file, 1, 1, len(lines), len(lines[-1]) + 1)
    return LoadedDocument(file, text, text, SourceMap(file, {(): NodeLocation(span)}))


def _unknown_keys(
    doc: LoadedDocument, path: JsonPath, body: Mapping[str, Any], keys: frozenset[str]
) -> Iterator[Diagnostic]:
    named: list[tuple[JsonPath, Any]] = [
        ((*path, "emit", j, "key"), emit.get("key"))
        for j, emit in enumerate(body.get("emit") or ())
        if isinstance(emit, Mapping)
    ]
    named.append(((*path, "target"), body.get("target")))
    for where, key in named:
        if isinstance(key, str) and key not in keys:
            guess = did_you_mean(key, sorted(keys))
            yield Diagnostic.at(
                codes.UNKNOWN_CONTEXT_KEY,
                f"pack template writes unknown context key {key!r}",
                doc.source_map.span(where),
                path=where,
                hint=suggestion(guess)
                if guess
                else "declare it under the pipeline's 'keys:', or leave the key out of the "
                "template so the pipeline's `output:` is used",
            )


def template_diagnostics(
    pack: Pack,
    *,
    suggestors: Collection[str] | None = None,
    inputs: frozenset[str] | None = None,
    keys: frozenset[str] | None = None,
) -> list[Diagnostic]:
    """Problems in the templates of `pack` (only `suggestors`, when given).

    `inputs` and `keys` are the using pipeline's declared inputs and context
    keys; None (a pack on its own) leaves them unchecked.
    """
    doc = pack.document
    if doc is None:
        return []
    found: list[Diagnostic] = []
    for name, definition in pack.suggestors.items():
        if definition.template is None or (suggestors is not None and name not in suggestors):
            continue
        path: JsonPath = ("suggestors", name, "template")
        written = doc.data["suggestors"][name].get("template") or {}
        body = {**written, "kind": definition.kind}
        for site in TEMPLATE_KINDS.spec(path, body).templates(PARAMS):
            found.extend(
                template_problems(
                    doc,
                    site.path,
                    site.text,
                    expression=site.expression,
                    names=site.names,
                    inputs=inputs,
                )
            )
            if keys is not None:
                found.extend(unknown_reads(doc, site, keys))
        prompt = definition.template.get("prompt")
        texts = prompt if isinstance(prompt, Mapping) else {}
        for role, relative in sorted(definition.prompt_files.items()):
            text = texts.get(role)
            if isinstance(text, str):
                file_doc = _text_document(f"{pack.display}/{relative}", text)
                found.extend(
                    template_problems(
                        file_doc,
                        (),
                        text,
                        expression=False,
                        names=CONTEXT_NAMES | PARAMS,
                        inputs=inputs,
                    )
                )
                if keys is not None:
                    site = TemplateSite((), text, False, CONTEXT_NAMES | PARAMS)
                    found.extend(unknown_reads(file_doc, site, keys))
        if keys is not None:
            found.extend(_unknown_keys(doc, path, written, keys))
    return found
