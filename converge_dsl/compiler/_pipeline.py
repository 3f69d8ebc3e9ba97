"""compile_pipeline(settings) -> CompiledPipeline: the validated YAML as immutable typed objects.

The document must already be valid (`converge_dsl.validation.load_pipeline`).
`compile_settings` (see `_settings`) reads the pipeline's settings first;
`compile_pipeline` then builds each suggestor with the builder of its kind in
the kind registry it is given (`converge_dsl.frontend.KindRegistry`; default:
the front end's seed, rule and llm, whose builders live here; the caller hands
down the registry with `agent` and `pack`, which live above the compiler) and
the invariants as the engine's `Invariant`s. Templates and
expressions are compiled here, once. Every object keeps its `SourceSpan`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.engine import Budget, Invariant, OnError, PromotionPolicy
from converge_dsl.engine.invariants import INVARIANT_CLASSES, InvariantClass
from converge_dsl.engine.types import ContextView, ProposedFact, Suggestor
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import (
    KINDS,
    InvariantSpec,
    KindRegistry,
    LoadedDocument,
    SuggestorKind,
    SuggestorSpec,
)
from converge_dsl.models.port import Model

from ._context import CompileContext, EventEmitter, SuggestorBuilder, ToolCaller, UsageRecorder
from ._scope import RenderScopes
from ._settings import PipelineSettings, compile_settings
from ._template import CompiledExpression, CompiledTemplate


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
    kinds: Mapping[str, str] = field(default_factory=dict)  # suggestor name -> kind name
    registry: KindRegistry = KINDS

    def kind_of(self, suggestor: str) -> SuggestorKind | None:
        """The kind of the suggestor called `suggestor` (None for an unknown name)."""
        name = self.kinds.get(suggestor)
        return None if name is None else self.registry.get(name)

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
    def inputs(self) -> JsonObject:
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
    source: LoadedDocument | PipelineSettings, inputs: JsonObject | None
) -> PipelineSettings:
    if isinstance(source, PipelineSettings):
        if inputs is not None:
            raise TypeError("inputs are resolved in the settings; pass them to compile_settings")
        return source
    return compile_settings(source, inputs=inputs or {})


def compile_context(
    source: LoadedDocument | PipelineSettings,
    *,
    inputs: JsonObject | None = None,
    models: Mapping[str, Model],
    usage: UsageRecorder,
    events: EventEmitter | None = None,
    kinds: KindRegistry = KINDS,
    tools: ToolCaller | None = None,
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
        kinds=kinds,
        key_schemas=settings.key_schemas,
        tools=tools,
        max_content_length=settings.promotion.max_content_length,
    )


def compile_pipeline(
    source: LoadedDocument | PipelineSettings,
    *,
    inputs: JsonObject | None = None,
    models: Mapping[str, Model],
    usage: UsageRecorder,
    events: EventEmitter | None = None,
    kinds: KindRegistry = KINDS,
    tools: ToolCaller | None = None,
) -> CompiledPipeline:
    """Compile a validated document (with `inputs`) or its settings.

    Each suggestor is built by its kind's builder in `kinds` (default: the
    front end's seed, rule and llm). Raises `PipelineInvalid` (located; a kind
    the registry lacks is CD602) or `UsageError` (inputs).
    """
    settings = _settings_of(source, inputs)
    ctx = compile_context(
        settings, models=models, usage=usage, events=events, kinds=kinds, tools=tools
    )
    suggestors: list[Suggestor] = []
    spans: dict[str, SourceSpan] = {}
    styles: dict[str, str] = {}
    for kind, spec in _specs(settings.document, ctx):
        builder: SuggestorBuilder = kind.builder()
        suggestor = builder(spec, ctx)
        suggestors.append(suggestor)
        spans[suggestor.name] = getattr(suggestor, "span", None) or ctx.span(spec.path)
        styles[suggestor.name] = kind.name
    invariants = tuple(_invariant(spec, ctx) for spec in settings.manifest.invariants)
    return CompiledPipeline(
        settings=settings,
        span=ctx.span(()),
        suggestors=tuple(suggestors),
        invariants=invariants,
        models=ctx.models,
        spans=MappingProxyType(spans),
        kinds=MappingProxyType(styles),
        registry=kinds,
    )


def _specs(
    document: LoadedDocument, ctx: CompileContext
) -> Iterator[tuple[SuggestorKind, SuggestorSpec]]:
    """Each suggestor's kind in `ctx.kinds` and its typed spec, parsed by that kind.

    A kind the registry lacks is a located `PipelineInvalid` (CD602).
    """
    for index, raw in enumerate(document.data.get("suggestors") or ()):
        path: JsonPath = ("suggestors", index)
        name = str(raw.get("kind"))
        kind = ctx.kinds.get(name)
        if kind is None:
            raise ctx.invalid(
                codes.COMPILE_KIND_UNAVAILABLE,
                f"suggestor kind {name!r} is not available",
                (*path, "kind"),
            )
        yield kind, kind.parse(path, raw)


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
    "CompiledPipeline",
    "InvariantCheck",
    "PipelineInvalid",
    "compile_context",
    "compile_pipeline",
]
