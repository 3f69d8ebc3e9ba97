"""compile_pipeline(settings) -> CompiledPipeline: the validated YAML as immutable typed objects.

The document must already be valid (`converge_dsl.validation.load_pipeline`).
`compile_settings` (see `_settings`) reads the pipeline's settings first;
`compile_pipeline` then builds the suggestors by kind through the builder table
it is given (kind -> `SuggestorBuilder`; the compiler's own `BUILDERS` hold
seed, rule and llm: the caller adds `agent` and `pack`, which live above the
compiler) and the invariants as the engine's `Invariant`s. Templates and
expressions are compiled here, once. Every object keeps its `SourceSpan`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from converge_dsl import codes
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.engine import Budget, Invariant, OnError, PromotionPolicy
from converge_dsl.engine.invariants import INVARIANT_CLASSES, InvariantClass
from converge_dsl.engine.types import ContextView, ProposedFact, Suggestor
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import InvariantSpec, LoadedDocument
from converge_dsl.models.port import Model

from ._context import CompileContext, EventEmitter, SuggestorBuilder, UsageRecorder
from ._kinds import build_rule, build_seed
from ._llm import build_llm
from ._scope import RenderScopes
from ._settings import PipelineSettings, compile_settings
from ._template import CompiledExpression, CompiledTemplate

BUILDERS: Mapping[str, SuggestorBuilder] = MappingProxyType(
    {"seed": build_seed, "rule": build_rule, "llm": build_llm}
)


@dataclass(frozen=True, slots=True)
class InvariantCheck:
    """The compiled `check` of an invariant: None when it holds, else the failure message."""

    name: str
    expression: CompiledExpression
    message: CompiledTemplate | None
    scopes: RenderScopes
    span: SourceSpan

    def __call__(self, view: ContextView) -> str | None:
        scope = self.scopes.scope(view)
        if self.expression.evaluate(scope, suggestor=f"invariant {self.name}", cycle=view.cycle):
            return None
        if self.message is not None:
            return self.message.render(scope, suggestor=f"invariant {self.name}", cycle=view.cycle)
        return f"invariant {self.name!r} does not hold: {self.expression.source}"


@dataclass(frozen=True, slots=True)
class CompiledPipeline:
    """Everything the runtime needs to run one pipeline: its settings plus compiled parts.

    Immutable. `invariants` are the engine's own (`check` is an `InvariantCheck`).
    """

    settings: PipelineSettings
    span: SourceSpan
    suggestors: tuple[Suggestor, ...]
    invariants: tuple[Invariant, ...]
    models: Mapping[str, Model]
    spans: Mapping[str, SourceSpan] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.settings.name

    @property
    def file(self) -> str:
        return self.settings.file

    @property
    def declared_keys(self) -> tuple[str, ...]:
        return self.settings.declared_keys

    @property
    def inputs(self) -> Mapping[str, Any]:
        return self.settings.inputs

    @property
    def seeds(self) -> tuple[ProposedFact, ...]:
        return self.settings.seeds

    @property
    def budget(self) -> Budget:
        return self.settings.budget

    @property
    def promotion(self) -> PromotionPolicy:
        return self.settings.promotion

    @property
    def on_error(self) -> OnError:
        return self.settings.on_error

    def span_of(self, suggestor: str | None) -> SourceSpan | None:
        return None if suggestor is None else self.spans.get(suggestor)


def _settings_of(
    source: LoadedDocument | PipelineSettings, inputs: Mapping[str, Any] | None
) -> PipelineSettings:
    if isinstance(source, PipelineSettings):
        if inputs is not None:
            raise TypeError("inputs are resolved in the settings; pass them to compile_settings")
        return source
    return compile_settings(source, inputs=inputs or {})


def compile_context(
    source: LoadedDocument | PipelineSettings,
    *,
    inputs: Mapping[str, Any] | None = None,
    models: Mapping[str, Model],
    usage: UsageRecorder,
    events: EventEmitter | None = None,
    builders: Mapping[str, SuggestorBuilder] = BUILDERS,
) -> CompileContext:
    """The `CompileContext` every builder of a pipeline receives.

    `source` is a validated document (then `inputs` are resolved here: `UsageError`
    for unknown or missing ones) or its `PipelineSettings`. `compile_pipeline`
    builds every suggestor with it; tools that compile only some suggestors
    (`plan`) use it too.
    """
    settings = _settings_of(source, inputs)
    return CompileContext(
        pipeline=settings.name,
        document=settings.document,
        models=MappingProxyType(dict(models)),
        usage=usage,
        events=events,
        inputs=settings.inputs,
        declared_keys=settings.declared_keys,
        base_dir=Path(settings.file).parent,
        scopes=RenderScopes(settings.declared_keys, dict(settings.inputs)),
        builders=MappingProxyType(dict(builders)),
        key_schemas=settings.key_schemas,
    )


def compile_pipeline(
    source: LoadedDocument | PipelineSettings,
    *,
    inputs: Mapping[str, Any] | None = None,
    models: Mapping[str, Model],
    usage: UsageRecorder,
    events: EventEmitter | None = None,
    builders: Mapping[str, SuggestorBuilder] = BUILDERS,
) -> CompiledPipeline:
    """Compile a validated document (with `inputs`) or its settings.

    Suggestors are built through `builders` (kind -> builder; default: the
    compiler's seed, rule and llm). Raises `PipelineInvalid` (located; a kind
    with no builder is CD602) or `UsageError` (inputs).
    """
    settings = _settings_of(source, inputs)
    ctx = compile_context(settings, models=models, usage=usage, events=events, builders=builders)
    suggestors: list[Suggestor] = []
    spans: dict[str, SourceSpan] = {}
    for index, spec in enumerate(settings.document.data.get("suggestors") or ()):
        path = ("suggestors", index)
        kind = str(spec.get("kind"))
        builder = ctx.builders.get(kind)
        if builder is None:
            raise ctx.invalid(
                codes.COMPILE_KIND_UNAVAILABLE,
                f"suggestor kind {kind!r} is not available",
                (*path, "kind"),
            )
        suggestor = builder(spec, path, ctx)
        suggestors.append(suggestor)
        spans[suggestor.name] = getattr(suggestor, "span", None) or ctx.span(path)
    invariants = tuple(_invariant(spec, ctx) for spec in settings.manifest.invariants)
    return CompiledPipeline(
        settings=settings,
        span=ctx.span(()),
        suggestors=tuple(suggestors),
        invariants=invariants,
        models=ctx.models,
        spans=MappingProxyType(spans),
    )


def _invariant_class(value: object) -> InvariantClass:
    for name in INVARIANT_CLASSES:
        if name == value:
            return name
    raise ValueError(f"invariant class must be one of {', '.join(INVARIANT_CLASSES)}")


def _invariant(spec: InvariantSpec, ctx: CompileContext) -> Invariant:
    name, message, path = spec.name, spec.message, spec.path
    check = InvariantCheck(
        name=name,
        expression=ctx.expression(spec.check, (*path, "check")),
        message=None if message is None else ctx.template(message, (*path, "message")),
        scopes=ctx.scopes,
        span=ctx.span(path),
    )
    critical = True if spec.critical is None else spec.critical
    return Invariant(name, _invariant_class(spec.klass), critical, check)


__all__ = [
    "BUILDERS",
    "CompiledPipeline",
    "InvariantCheck",
    "PipelineInvalid",
    "compile_context",
    "compile_pipeline",
]
