"""The compiler: a validated pipeline document -> immutable typed pipeline objects.

Public surface:
- `compile_pipeline(document, *, inputs, models, usage, events=None) -> CompiledPipeline`
  (`compile` is an alias).
- `CompileContext`: what every suggestor builder receives (pipeline name,
  source map, models by name, usage meter, event sink, inputs, declared keys,
  base dir, shared render scopes; `ctx.template(src, path)` /
  `ctx.expression(src, path)` compile once with located errors;
  `ctx.source(name)` is the provenance source `name@pipeline`).
- `compile_context(document, *, inputs, models, usage, events=None) -> CompileContext`:
  the context every builder receives (for tools that compile only some suggestors).
- `SuggestorCore` (name, provenance source, dependencies, targets, `when`, span,
  `accepts` with the idempotent default), `CoreSuggestor` (mixin delegating the
  protocol's identity members to `self.core`), `UsageRecorder` (the usage-meter
  protocol LLM-backed suggestors record into), `EventEmitter` (the event sink type).
- `SuggestorBuilder = Callable[[spec, path, CompileContext], Suggestor]` and
  `BUILDERS: dict[kind, SuggestorBuilder]` (seed, rule, llm; `agent` and `pack`
  resolve lazily to `converge_dsl.agents.compile_agent` and
  `converge_dsl.packs.compile_pack_suggestor`, or register with
  `BUILDERS["agent"] = compile_agent`).
- `RenderScopes`, `with_item`: the render-time template context, built once per view version.
- `CompiledTemplate`, `CompiledExpression`: render with a located `TemplateRunError`.
"""

from __future__ import annotations

from ._common import CoreSuggestor, SuggestorCore
from ._context import CompileContext, EventEmitter, SuggestorBuilder, UsageRecorder, template_span
from ._pipeline import (
    BUDGET_DEFAULTS,
    BUILDERS,
    PROMOTION_DEFAULTS,
    CompiledInvariant,
    CompiledPipeline,
    builder_for,
    compile_context,
    compile_pipeline,
    resolve_inputs,
)
from ._scope import RenderScopes, with_item
from ._template import CompiledExpression, CompiledTemplate

compile = compile_pipeline

__all__ = [
    "BUDGET_DEFAULTS",
    "BUILDERS",
    "PROMOTION_DEFAULTS",
    "CompileContext",
    "CompiledExpression",
    "CompiledInvariant",
    "CompiledPipeline",
    "CompiledTemplate",
    "CoreSuggestor",
    "EventEmitter",
    "RenderScopes",
    "SuggestorBuilder",
    "SuggestorCore",
    "UsageRecorder",
    "builder_for",
    "compile",
    "compile_context",
    "compile_pipeline",
    "resolve_inputs",
    "template_span",
    "with_item",
]
