"""The compiler: a validated pipeline document -> immutable typed pipeline objects.

Public surface:
- `compile_settings(document_or_manifest, *, inputs)` -> `PipelineSettings`: the cheap
  first step, read from the front end's `PipelineManifest` (name, the engine's `Budget`
  and `PromotionPolicy` with the key schemas, `on_error`, resolved inputs, declared
  keys and their schemas, seed facts with their data, `ModelDeclaration`s by name,
  base dir, the manifest). Raises `UsageError` for unknown or missing inputs, a
  located `PipelineInvalid` (CD605) for a key schema that is not a valid JSON Schema.
- `declare_models(document_or_manifest) -> {name: ModelDeclaration}`: the typed
  `models:` entries (the `ModelSpec` handed to the models factory, the files each
  model reads).
- `compile_pipeline(settings_or_document, *, inputs=None, models, usage, events=None,
  kinds=KINDS)` -> `CompiledPipeline` (the settings plus suggestors, the engine's
  `Invariant`s with an `InvariantCheck`, models, spans, each suggestor's kind
  `kind_of(name)`). `inputs` only with a document. `kinds` is the suggestor-kind
  registry (`converge_dsl.frontend.KindRegistry`; default: the front end's seed,
  rule and llm, whose builders live here); callers above hand down the one with
  agent and pack (`converge_dsl.validation.KINDS`).
- `resolve_inputs(declared, given)`: the declared inputs (`InputSpec`s by name) with
  defaults applied (`unknown_input(name, declared)`: its `UsageError` for an input
  not declared); `budget_of(spec)`: the engine's `Budget` of a `budget:` section;
  `key_schemas(document_or_manifest)`: the declared keys' schemas by key name.
- `CompileContext`: what every suggestor builder receives (pipeline name,
  source map, models by name, usage meter, event sink, inputs, declared keys
  and their schemas, base dir, shared render scopes, the kind registry;
  `ctx.template(src, path)` / `ctx.expression(src, path)` compile once with
  located errors;
  `ctx.source(name)` is the provenance source `name@pipeline`).
- `compile_context(settings_or_document, *, inputs=None, models, usage, events=None,
  kinds=KINDS) -> CompileContext`: the context every builder receives (for
  tools that compile only some suggestors).
- `SuggestorCore` (name, provenance source, dependencies, targets, `when`, span,
  `accepts` with the idempotent default), `CoreSuggestor` (mixin delegating the
  protocol's identity members to `self.core`), `UsageRecorder` (the usage-meter
  protocol LLM-backed suggestors record into), `EventEmitter` (the event sink type),
  `ToolCaller` (the run's MCP tools, as agents list and call them).
- `SuggestorBuilder = Callable[[SuggestorSpec, CompileContext], Suggestor]`, what a
  `SuggestorKind`'s builder is.
- `RunParts` (models, usage meter, event sink, MCP tools): what belongs to one run; a compiled
  suggestor other runs may use has `for_run(parts)` (the seed, rule, llm and pack
  solver suggestors do).
- `RenderScopes`, `with_item`: the render-time template context, updated per view version
  by the keys that changed; `RenderScopes.owns` answers the idempotent default from an index.
- `CompileCache`, `open_cache(env, pipeline_text, inputs, lock_file, secret)`,
  `LOCK_FILE` (the lock file's name, as `converge_dsl.packs` names it): the
  on-disk compile cache (compiled template code per pipeline, MAC-verified, atomic,
  bounded; `CompileCache.session()` wraps a compilation; off with the environment
  variable CONVERGE_DSL_NO_CACHE=1). Every distinct template source is compiled once per
  process, whatever the cache.
- `CompiledTemplate`, `CompiledExpression`: render with a `TemplateRunError` located at
  the template's line (`LoadedDocument.template_span`).
"""

from __future__ import annotations

from ._common import CoreSuggestor, SuggestorCore
from ._compile_cache import LOCK_FILE, CompileCache, open_cache
from ._context import (
    CompileContext,
    EventEmitter,
    RunParts,
    SuggestorBuilder,
    ToolCaller,
    UsageRecorder,
)
from ._pipeline import (
    CompiledPipeline,
    InvariantCheck,
    compile_context,
    compile_pipeline,
)
from ._scope import RenderScopes, with_item
from ._settings import (
    ModelDeclaration,
    PipelineSettings,
    budget_of,
    compile_settings,
    declare_models,
    key_schemas,
    resolve_inputs,
    unknown_input,
)
from ._template import CompiledExpression, CompiledTemplate

__all__ = [
    "LOCK_FILE",
    "CompileCache",
    "CompileContext",
    "CompiledExpression",
    "CompiledPipeline",
    "CompiledTemplate",
    "CoreSuggestor",
    "EventEmitter",
    "InvariantCheck",
    "ModelDeclaration",
    "PipelineSettings",
    "RenderScopes",
    "RunParts",
    "SuggestorBuilder",
    "SuggestorCore",
    "ToolCaller",
    "UsageRecorder",
    "budget_of",
    "compile_context",
    "compile_pipeline",
    "compile_settings",
    "declare_models",
    "key_schemas",
    "open_cache",
    "resolve_inputs",
    "unknown_input",
    "with_item",
]
