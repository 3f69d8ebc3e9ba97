"""What every suggestor builder receives, and the builder signature.

The compiler builds each `suggestors[i]` entry with the builder of its kind
in the kind registry it is given (`ctx.kinds`, a `converge_dsl.frontend.KindRegistry`;
default: the front end's seed, rule and llm, see docs/architecture.md §6). A
builder is a plain function:

    def build_rule(spec: RuleSpec, ctx: CompileContext) -> Suggestor

- `spec` is the suggestor's typed spec, parsed by its kind (`SuggestorSpec`: name,
  dependencies, targets, `when`, and the kind's own fields); `spec.path` is its
  JSON path (`("suggestors", 3)`), so `ctx.span((*spec.path, "emit", 0, "id"))`
  locates any of its nodes;
- `ctx` gives the pipeline name, the source map, the compiled models, the usage
  meter, the event sink, the run's MCP tools (`ctx.tools`, a `ToolCaller`), the
  inputs, the declared keys (and their schemas, `ctx.key_schemas`), the base directory and
  the shared render scopes (`ctx.scopes.scope(view)`), the kind registry
  (`ctx.kinds`, for builders that build other kinds, e.g. a pack's template),
  plus `ctx.template(...)` and `ctx.expression(...)` which compile once and
  report a located `PipelineInvalid` on error.
A builder returns an immutable object implementing the `Suggestor` protocol and
exposing `span: SourceSpan`. It raises `PipelineInvalid` for problems it finds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from converge_dsl import codes
from converge_dsl._json_types import JsonObject, JsonSchema
from converge_dsl.diagnostics import Diagnostic, JsonPath, SourceSpan
from converge_dsl.engine.budget import Reservation, StopReason
from converge_dsl.engine.types import Suggestor
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import KindRegistry, LoadedDocument, SourceMap, SuggestorSpec
from converge_dsl.models.port import Model, ToolSpec
from converge_dsl.sandbox import NAMES_HINT, TemplateCompileError

from ._scope import RenderScopes
from ._sources import SOURCES, Source
from ._template import CompiledExpression, CompiledTemplate


class UsageRecorder(Protocol):
    """The part of the engine's `UsageMeter` the compiler uses."""

    def record(
        self, *, model_calls: int = 0, input_tokens: int = 0, output_tokens: int = 0
    ) -> None: ...

    def can_call(self) -> bool: ...

    def reserve(
        self, tokens_estimate: int = 0, answer_cap: int | None = None
    ) -> Reservation | None: ...

    async def reserve_call(
        self, tokens_estimate: int = 0, answer_cap: int | None = None
    ) -> Reservation | None: ...

    def note_budget_refusal(self) -> StopReason: ...


class ToolCaller(Protocol):
    """The MCP tools of one run (`converge_dsl.tools.RunTools`): the tools a server
    offers, and calls whose failures come back as error text (tool errors are soft)."""

    async def listing(self, server: str) -> tuple[ToolSpec, ...]: ...

    async def call(
        self,
        suggestor: str,
        cycle: int,
        server: str,
        tool: str,
        arguments: JsonObject,
        *,
        call_id: str | None = None,
    ) -> tuple[str, bool]: ...

    async def answer(
        self, suggestor: str, cycle: int, server: str, tool: str, arguments: JsonObject
    ) -> tuple[str, bool] | None:
        """`call`, but None when `budget.max_tool_calls` refused it (the run then stops
        with `tool_call_budget_exhausted`)."""
        ...


# The engine's `EventSink`: a callable taking a pydantic event.
EventEmitter = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class RunParts:
    """What belongs to one run of a compiled pipeline: its models by name, its usage
    meter and its event sink (what `compile_pipeline` is given for the first run).

    A compiled suggestor that another run may use as it is, or with these
    parts put in, has `for_run(parts) -> Suggestor` (itself when it holds none
    of them); the runtime then compiles a pipeline once and hands each run
    the suggestors' `for_run` (docs/architecture.md §12).
    """

    models: Mapping[str, Model]
    usage: UsageRecorder
    events: EventEmitter | None = None
    tools: ToolCaller | None = None


@dataclass(frozen=True, slots=True)
class CompileContext:
    """Everything a suggestor builder may use. Immutable; shared by all builders of a pipeline."""

    pipeline: str
    document: LoadedDocument
    models: Mapping[str, Model]
    usage: UsageRecorder
    events: EventEmitter | None
    inputs: JsonObject
    declared_keys: tuple[str, ...]
    base_dir: Path
    scopes: RenderScopes
    kinds: KindRegistry
    key_schemas: Mapping[str, JsonSchema] = field(default_factory=dict)
    tools: ToolCaller | None = None  # the run's MCP tool servers (None: the pipeline has none)
    # The promotion gate's limit on content plus data: a diagnostic's quotes fit within it.
    max_content_length: int = 10000

    @property
    def source_map(self) -> SourceMap:
        return self.document.source_map

    def source(self, suggestor: str) -> str:
        """The provenance source of a suggestor: `name@pipeline`."""
        return f"{suggestor}@{self.pipeline}"

    def span(self, path: JsonPath) -> SourceSpan:
        return self.source_map.span(path)

    def invalid(
        self, code: str, message: str, path: JsonPath, hint: str | None = None
    ) -> PipelineInvalid:
        return PipelineInvalid(
            [Diagnostic.at(code, message, self.span(path), path=path, hint=hint)]
        )

    def _compiled(
        self, source: str, path: JsonPath, extra: frozenset[str], expression: bool
    ) -> Source:
        """The compiled source, its names checked against the context API + `extra`."""
        try:
            compiled = SOURCES.get(source, expression=expression)
        except TemplateCompileError as exc:
            raise self._compile_error(exc, path) from None
        unknown = sorted(compiled.names - self.scopes.names - extra)
        if unknown:
            from converge_dsl.diagnostics import did_you_mean, suggestion

            guess = did_you_mean(unknown[0], sorted(self.scopes.names | extra))
            raise self.invalid(
                codes.COMPILE_UNKNOWN_NAME,
                f"template reads unknown name {unknown[0]!r}",
                path,
                hint=suggestion(guess) if guess else NAMES_HINT,
            )
        try:
            compiled.check()
        except TemplateCompileError as exc:
            raise self._compile_error(exc, path) from None
        return compiled

    def _compile_error(self, exc: TemplateCompileError, path: JsonPath) -> PipelineInvalid:
        return PipelineInvalid(
            [
                Diagnostic.at(
                    codes.COMPILE_TEMPLATE_SYNTAX,
                    f"template does not compile: {exc.message}",
                    self.document.template_span(path, exc.lineno),
                    path=path,
                )
            ]
        )

    def template(
        self, source: str, path: JsonPath, *, extra: frozenset[str] = frozenset()
    ) -> CompiledTemplate:
        """Compile a template at `path` once (names checked against the context API + `extra`)."""
        compiled = self._compiled(source, path, extra, expression=False)
        return CompiledTemplate.of_source(compiled, self.document, path)

    def expression(
        self, source: str, path: JsonPath, *, extra: frozenset[str] = frozenset()
    ) -> CompiledExpression:
        compiled = self._compiled(source, path, extra, expression=True)
        return CompiledExpression.of_source(compiled, self.document, path)


SuggestorBuilder = Callable[[SuggestorSpec, CompileContext], Suggestor]
