"""compile(document) -> CompiledPipeline: the validated YAML as immutable typed objects.

The document must already be valid (`converge_dsl.frontend.load_pipeline`).
Suggestors are built by kind through `BUILDERS` (kind -> `SuggestorBuilder`);
`agent` and `pack` resolve lazily to `converge_dsl.agents.compile_agent` and
`converge_dsl.packs.compile_pack_suggestor`. Templates and expressions are
compiled here, once. Every object keeps its `SourceSpan`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import SourceSpan, did_you_mean
from converge_dsl.engine.types import ContextView, ProposedFact, Provenance, Suggestor
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.keys import BUILTIN_KEYS
from converge_dsl.models.port import Model

from ._context import CompileContext, EventEmitter, SuggestorBuilder, UsageRecorder
from ._kinds import build_rule, build_seed
from ._llm import build_llm
from ._scope import RenderScopes
from ._template import CompiledExpression, CompiledTemplate

BUILDERS: dict[str, SuggestorBuilder] = {"seed": build_seed, "rule": build_rule, "llm": build_llm}
_LAZY_BUILDERS = {
    "agent": ("converge_dsl.agents", "compile_agent"),
    "pack": ("converge_dsl.packs", "compile_pack_suggestor"),
}

BUDGET_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"max_cycles": 100, "max_facts": 10_000, "max_concurrency": 32}
)
PROMOTION_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "min_confidence": 0.5,
        "max_content_length": 10_000,
        "require_provenance": True,
        "forbidden_terms": (),
        "gated_keys": (),
    }
)


def builder_for(kind: str) -> SuggestorBuilder | None:
    builder = BUILDERS.get(kind)
    if builder is None and kind in _LAZY_BUILDERS:
        module, attribute = _LAZY_BUILDERS[kind]
        try:
            builder = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError):
            return None
    return builder


@dataclass(frozen=True, slots=True)
class CompiledInvariant:
    """An invariant: `check(view)` returns None when it holds, else the failure message."""

    name: str
    invariant_class: str
    critical: bool
    expression: CompiledExpression
    message: CompiledTemplate | None
    scopes: RenderScopes
    span: SourceSpan

    def check(self, view: ContextView) -> str | None:
        scope = self.scopes.scope(view)
        if self.expression.evaluate(scope, suggestor=f"invariant {self.name}", cycle=view.cycle):
            return None
        if self.message is not None:
            return self.message.render(scope, suggestor=f"invariant {self.name}", cycle=view.cycle)
        return f"invariant {self.name!r} does not hold: {self.expression.source}"


@dataclass(frozen=True, slots=True)
class CompiledPipeline:
    """Everything the runtime needs to run one pipeline. Immutable."""

    name: str
    file: str
    span: SourceSpan
    declared_keys: tuple[str, ...]
    inputs: Mapping[str, Any]
    seeds: tuple[ProposedFact, ...]
    suggestors: tuple[Suggestor, ...]
    invariants: tuple[CompiledInvariant, ...]
    budget: Mapping[str, Any]
    promotion: Mapping[str, Any]
    on_error: str
    models: Mapping[str, Model]
    spans: Mapping[str, SourceSpan] = field(default_factory=dict)

    def span_of(self, suggestor: str | None) -> SourceSpan | None:
        return None if suggestor is None else self.spans.get(suggestor)


def resolve_inputs(declared: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """Declared inputs with defaults applied; raises `UsageError` for unknown or missing ones."""
    for name in given:
        if name not in declared:
            guess = did_you_mean(name, declared)
            raise UsageError(
                f"unknown input {name!r}",
                hint=f"did you mean {guess!r}?"
                if guess
                else f"declared inputs: {', '.join(sorted(declared)) or 'none'}",
            )
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        spec_map = spec or {}
        if name in given:
            values[name] = given[name]
        elif "default" in spec_map:
            values[name] = spec_map["default"]
        elif spec_map.get("required", False):
            raise UsageError(f"input {name!r} is required", hint=f"pass --input {name}=VALUE")
    return values


def compile_context(
    document: LoadedDocument,
    *,
    inputs: Mapping[str, Any],
    models: Mapping[str, Model],
    usage: UsageRecorder,
    events: EventEmitter | None = None,
) -> CompileContext:
    """The `CompileContext` of a validated document: declared keys, resolved inputs, scopes.

    Raises `UsageError` for unknown or missing inputs. `compile_pipeline` builds
    every suggestor with it; tools that compile only some suggestors (`plan`) use it too.
    """
    data = document.data
    declared = tuple(
        dict.fromkeys([*BUILTIN_KEYS, *(str(k["name"]) for k in data.get("keys") or ())])
    )
    resolved = resolve_inputs(data.get("inputs") or {}, inputs)
    return CompileContext(
        pipeline=str(data["name"]),
        source_map=document.source_map,
        models=MappingProxyType(dict(models)),
        usage=usage,
        events=events,
        inputs=MappingProxyType(resolved),
        declared_keys=declared,
        base_dir=Path(document.file).parent,
        scopes=RenderScopes(declared, resolved),
    )


def compile_pipeline(
    document: LoadedDocument,
    *,
    inputs: Mapping[str, Any],
    models: Mapping[str, Model],
    usage: UsageRecorder,
    events: EventEmitter | None = None,
) -> CompiledPipeline:
    """Compile a validated document. Raises `PipelineInvalid` (located) or `UsageError` (inputs)."""
    data = document.data
    ctx = compile_context(document, inputs=inputs, models=models, usage=usage, events=events)
    name, declared = ctx.pipeline, ctx.declared_keys
    suggestors: list[Suggestor] = []
    spans: dict[str, SourceSpan] = {}
    for index, spec in enumerate(data.get("suggestors") or ()):
        path = ("suggestors", index)
        kind = str(spec.get("kind"))
        builder = builder_for(kind)
        if builder is None:
            raise ctx.invalid(
                codes.COMPILE_KIND_UNAVAILABLE,
                f"suggestor kind {kind!r} is not available",
                (*path, "kind"),
            )
        suggestor = builder(spec, path, ctx)
        suggestors.append(suggestor)
        spans[suggestor.name] = getattr(suggestor, "span", None) or ctx.span(path)
    seed_source = ctx.source("seeds")
    seeds = tuple(
        ProposedFact(
            key=str(s.get("key", "seeds")),
            id=str(s["id"]),
            content=s["content"],
            confidence=float(s.get("confidence", 1.0)),
            provenance=Provenance(seed_source),
        )
        for s in data.get("seeds") or ()
    )
    invariants = tuple(
        _invariant(spec, ("invariants", i), ctx)
        for i, spec in enumerate(data.get("invariants") or ())
    )
    return CompiledPipeline(
        name=name,
        file=document.file,
        span=ctx.span(()),
        declared_keys=declared,
        inputs=ctx.inputs,
        seeds=seeds,
        suggestors=tuple(suggestors),
        invariants=invariants,
        budget=MappingProxyType({**BUDGET_DEFAULTS, **(data.get("budget") or {})}),
        promotion=MappingProxyType({**PROMOTION_DEFAULTS, **(data.get("promotion") or {})}),
        on_error=str(data.get("on_error", "stop")),
        models=ctx.models,
        spans=MappingProxyType(spans),
    )


def _invariant(
    spec: Mapping[str, Any], path: tuple[str | int, ...], ctx: CompileContext
) -> CompiledInvariant:
    message = spec.get("message")
    return CompiledInvariant(
        name=str(spec["name"]),
        invariant_class=str(spec["class"]),
        critical=bool(spec.get("critical", True)),
        expression=ctx.expression(str(spec["check"]), (*path, "check")),
        message=None if message is None else ctx.template(str(message), (*path, "message")),
        scopes=ctx.scopes,
        span=ctx.span(path),
    )


__all__ = [
    "BUILDERS",
    "CompiledInvariant",
    "CompiledPipeline",
    "PipelineInvalid",
    "compile_context",
    "compile_pipeline",
]
