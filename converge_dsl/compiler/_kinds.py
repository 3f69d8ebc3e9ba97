"""The `seed` and `rule` suggestor kinds (docs/architecture.md §14).

- `seed`: proposes fixed facts (id/content are templates) to `target` (default `seeds`).
- `rule`: proposes each `emit` entry (a fixed key; templated
  id/content/confidence).
Both render over the cycle's shared render scope; neither does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from converge_dsl.diagnostics import JsonPath
from converge_dsl.engine.types import AgentEffect, ContextView, ProposedFact, Provenance

from ._common import CoreSuggestor, SuggestorCore, compile_value, render_confidence, render_value
from ._context import CompileContext


@dataclass(frozen=True, slots=True)
class Emission:
    """One fact a seed or rule proposes: key, and compiled id/content/confidence."""

    key: str
    id: Any
    content: Any
    confidence: Any


@dataclass(frozen=True, slots=True)
class EmittingSuggestor(CoreSuggestor):
    """A suggestor that renders a fixed list of emissions (kinds `seed` and `rule`)."""

    core: SuggestorCore
    kind: str
    emissions: tuple[Emission, ...]

    async def execute(self, ctx: ContextView) -> AgentEffect:
        core = self.core
        scope = core.scopes.scope(ctx)
        cycle = ctx.cycle
        provenance = Provenance(core.source)
        proposals = [
            ProposedFact(
                key=e.key,
                id=str(render_value(e.id, scope, core.name, cycle)),
                content=render_value(e.content, scope, core.name, cycle),
                confidence=render_confidence(e.confidence, scope, core.name, cycle),
                provenance=provenance,
            )
            for e in self.emissions
        ]
        return AgentEffect(tuple(proposals))


def _emissions(
    items: Any, path: JsonPath, ctx: CompileContext, default_key: str | None
) -> tuple[Emission, ...]:
    out = []
    for index, item in enumerate(items or ()):
        where = (*path, index)
        out.append(
            Emission(
                key=str(item.get("key", default_key)),
                id=ctx.template(str(item["id"]), (*where, "id")),
                content=compile_value(item["content"], (*where, "content"), ctx),
                confidence=compile_value(item.get("confidence", 1.0), (*where, "confidence"), ctx),
            )
        )
    return tuple(out)


def build_seed(spec: Mapping[str, Any], path: JsonPath, ctx: CompileContext) -> EmittingSuggestor:
    target = str(spec.get("target", "seeds"))
    emissions = _emissions(spec.get("facts"), (*path, "facts"), ctx, target)
    return EmittingSuggestor(SuggestorCore.of(spec, path, ctx, (target,)), "seed", emissions)


def build_rule(spec: Mapping[str, Any], path: JsonPath, ctx: CompileContext) -> EmittingSuggestor:
    emissions = _emissions(spec.get("emit"), (*path, "emit"), ctx, None)
    targets = tuple(e.key for e in emissions)
    return EmittingSuggestor(SuggestorCore.of(spec, path, ctx, targets), "rule", emissions)
