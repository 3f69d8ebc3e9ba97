"""The `seed` and `rule` suggestor kinds (docs/architecture.md §14).

- `seed`: proposes fixed facts (id/content are templates, `data` a JSON value
  given as is) to `target` (default `seeds`).
- `rule`: proposes each `emit` entry (a fixed key; templated
  id/content/confidence; `data` an expression, the `when` language, evaluated
  per firing over the same scope, whose value must be JSON).
Content is text: an object given as content (legacy) becomes the data when no
data is given, its canonical JSON text the content (`text_and_data`).
Both render over the cycle's shared render scope; neither does I/O, so both
are synchronous suggestors (`SyncSuggestor`: the engine runs them inline). A
suggestor whose every emission is literal (no template, no data expression)
proposes the same facts every time: they are built once, at compile time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from converge_dsl.engine.types import (
    AgentEffect,
    ContextView,
    ProposedFact,
    Provenance,
    freeze_json,
    text_and_data,
)
from converge_dsl.frontend import ProposalSpec, RuleSpec, SeedSpec

from ._common import (
    CoreSuggestor,
    SuggestorCore,
    compile_value,
    render_confidence,
    render_value,
)
from ._context import CompileContext, RunParts
from ._template import CompiledExpression, CompiledTemplate

_RENDERED = ("id", "content", "confidence", "data")


@dataclass(frozen=True, slots=True)
class Emission:
    """One fact a seed or rule proposes: key, compiled id/content/confidence, and data.

    `data` is a fixed JSON value (seeds) or a `CompiledExpression` (rules);
    `label` names the entry in run-time errors (`emit[0]`).
    """

    key: str
    id: Any
    content: Any
    confidence: Any
    data: Any = None
    label: str = ""

    def render(self, scope: dict[str, Any], name: str, cycle: int) -> tuple[str, Any]:
        """The content text and data of one firing."""
        content = render_value(self.content, scope, name, cycle)
        data = self.data
        if isinstance(data, CompiledExpression):
            what = f"{self.label}.data"
            data = data.evaluate_data(scope, what=what, suggestor=name, cycle=cycle)
        return text_and_data(content, data)


def _literal(value: Any) -> bool:
    """Whether a compiled value renders without reading any scope."""
    if isinstance(value, CompiledTemplate):
        return value.template is None
    if isinstance(value, Mapping):
        return all(_literal(v) for v in value.values())
    if isinstance(value, tuple):
        return all(_literal(v) for v in value)
    return not isinstance(value, CompiledExpression)


@dataclass(frozen=True, slots=True)
class EmittingSuggestor(CoreSuggestor):
    """A suggestor that renders a fixed list of emissions (kinds `seed` and `rule`).

    `fixed` is the effect of a suggestor whose emissions are all literal (built
    once by `of`); otherwise every firing renders them.
    """

    core: SuggestorCore
    kind: str
    emissions: tuple[Emission, ...]
    fixed: AgentEffect | None = None
    synchronous: ClassVar[bool] = True

    @classmethod
    def of(
        cls, core: SuggestorCore, kind: str, emissions: tuple[Emission, ...]
    ) -> EmittingSuggestor:
        made = cls(core, kind, emissions)
        if not all(_literal(getattr(e, f)) for e in emissions for f in _RENDERED):
            return made
        try:
            fixed = made._render({}, 0)
        except Exception:  # a literal that fails (a confidence of "high"): fails per firing
            return made
        return cls(core, kind, emissions, fixed)

    def for_run(self, run: RunParts) -> EmittingSuggestor:
        """Itself: it holds nothing of a run."""
        return self

    async def execute(self, ctx: ContextView) -> AgentEffect:
        return self.propose(ctx)

    def propose(self, ctx: ContextView) -> AgentEffect:
        fixed = self.fixed
        if fixed is not None:
            return fixed
        return self._render(self.core.scopes.scope(ctx), ctx.cycle)

    def _render(self, scope: dict[str, Any], cycle: int) -> AgentEffect:
        core = self.core
        provenance = Provenance(core.source)
        proposals = []
        for e in self.emissions:
            content, data = e.render(scope, core.name, cycle)
            proposals.append(
                ProposedFact(
                    key=e.key,
                    id=str(render_value(e.id, scope, core.name, cycle)),
                    content=content,
                    confidence=render_confidence(e.confidence, scope, core.name, cycle),
                    provenance=provenance,
                    data=data,
                )
            )
        return AgentEffect(tuple(proposals))


def _data(item: ProposalSpec, ctx: CompileContext, expression: bool) -> Any:
    if item.data is None:
        return None
    if expression:
        return ctx.expression(str(item.data), (*item.path, "data"))
    return freeze_json(item.data)


def _emissions(
    items: tuple[ProposalSpec, ...], ctx: CompileContext, expression: bool
) -> tuple[Emission, ...]:
    return tuple(
        Emission(
            key=item.key,
            id=ctx.template(item.id, (*item.path, "id")),
            content=compile_value(item.content, (*item.path, "content"), ctx),
            confidence=compile_value(item.confidence, (*item.path, "confidence"), ctx),
            data=_data(item, ctx, expression),
            label=item.label,
        )
        for item in items
    )


def build_seed(spec: SeedSpec, ctx: CompileContext) -> EmittingSuggestor:
    emissions = _emissions(spec.proposals, ctx, expression=False)
    return EmittingSuggestor.of(SuggestorCore.of(spec, ctx), spec.kind, emissions)


def build_rule(spec: RuleSpec, ctx: CompileContext) -> EmittingSuggestor:
    emissions = _emissions(spec.proposals, ctx, expression=True)
    targets = tuple(e.key for e in emissions)
    return EmittingSuggestor.of(SuggestorCore.of(spec, ctx, targets), spec.kind, emissions)
