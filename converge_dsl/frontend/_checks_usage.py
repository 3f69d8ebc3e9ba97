"""Semantic checks of how a pipeline uses what it declares: templates and leftovers.

Reachability (a suggestor whose dependencies nothing writes) is part of the data flow
(`_checks_dataflow.key_flow`)."""

from __future__ import annotations

from collections.abc import Iterator

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.frontend._facts import PipelineFacts


def templates_compile(facts: PipelineFacts) -> Iterator[Diagnostic]:
    from converge_dsl.frontend._templates import template_problems

    for site in facts.templates:
        yield from template_problems(
            facts.document,
            site.path,
            site.text,
            expression=site.expression,
            names=site.names,
            inputs=facts.inputs,
        )


def unused_declarations(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Warn about models, declared keys and inputs that nothing uses."""
    used_models = {model for spec in facts.specs for model in spec.models_used()}
    for name in sorted(facts.models - used_models):
        yield facts.warning(
            codes.UNUSED_MODEL,
            f"model {quoted(name)} is never used",
            ("models", name),
            on_key=True,
            hint="remove it, or use it in an llm or agent suggestor",
        )
    texts = " ".join(site.text for site in facts.templates)
    referenced = {key for _, key in facts.key_references}
    for key in facts.manifest.keys:
        name = key.name
        if name not in referenced and name not in texts:
            yield facts.warning(
                codes.UNUSED_KEY,
                f"key {quoted(name)} is declared but never used",
                (*key.path, "name"),
                hint="remove it, or read or write it",
            )
    for name in sorted(facts.inputs):
        if name not in texts:
            yield facts.warning(
                codes.UNUSED_INPUT,
                f"input {quoted(name)} is never read",
                ("inputs", name),
                on_key=True,
                hint=f"read it as '{{{{ inputs.{name} }}}}', or remove it",
            )


def object_content(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Warn about a JSON object given as `content`: it is read as data, for one version."""
    places: list[tuple[tuple[str | int, ...], object]] = [
        (("seeds", i), seed.get("content")) for i, seed in enumerate(facts.data.get("seeds") or ())
    ]
    for spec in facts.specs:
        places += spec.content_items()
    for path, content in places:
        if isinstance(content, dict):
            yield facts.warning(
                codes.OBJECT_CONTENT,
                "content is a JSON object: it is read as the fact's data, and its JSON text "
                "as the content (deprecated)",
                (*path, "content"),
                on_key=True,
                hint="give text as `content` and the object as `data`",
            )
