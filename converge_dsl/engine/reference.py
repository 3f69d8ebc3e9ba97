"""Reference suggestors (as in the Converge reference), and a convenient base class.

- `SeedSuggestor(name, facts)`: an always-candidate that proposes its facts
  once (it accepts while one of them is missing).
- `ReactOnceSuggestor`: reads `seeds` and proposes one hypothesis per seed,
  once (it accepts while some seed has no hypothesis yet); its content is
  text and its data `{"seed": <seed id>}`.

Both keep no state of their own: what they did is read back from the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from converge_dsl.engine.types import (
    HYPOTHESES,
    SEEDS,
    AgentEffect,
    ContextView,
    ProposedFact,
    Provenance,
)


class SuggestorBase:
    """Defaults for the `Suggestor` protocol: provenance from the name, no complexity hint.

    Subclasses set `name` and `dependencies` and implement `accepts` and `execute`.
    """

    name: str
    dependencies: tuple[str, ...] = ()

    def accepts(self, ctx: ContextView) -> bool:
        return True

    async def execute(self, ctx: ContextView) -> AgentEffect:
        return AgentEffect.empty()

    def provenance(self) -> Provenance:
        return Provenance(self.name)

    def complexity_hint(self) -> str | None:
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SeedSuggestor(SuggestorBase):
    """Proposes fixed facts (default key `seeds`) until they are all in the context.

    `facts` are `ProposedFact`s, `(id, content)` pairs or `(id, content,
    data)` triples; those without a provenance get this suggestor's.
    """

    def __init__(
        self,
        name: str,
        facts: Sequence[ProposedFact | tuple[str, str] | tuple[str, str, Any]],
        *,
        key: str = SEEDS,
    ) -> None:
        self.name = name
        self.dependencies = ()
        own = Provenance(name)
        items: list[ProposedFact] = []
        for item in facts:
            if isinstance(item, ProposedFact):
                items.append(replace(item, provenance=own) if item.provenance.is_empty else item)
            else:
                fact_id, content, *rest = item
                data = rest[0] if rest else None
                items.append(ProposedFact(key, fact_id, content, 1.0, own, data))
        self.facts: tuple[ProposedFact, ...] = tuple(items)

    def accepts(self, ctx: ContextView) -> bool:
        return any(ctx.fact(p.key, p.id) is None for p in self.facts)

    async def execute(self, ctx: ContextView) -> AgentEffect:
        return AgentEffect(tuple(p for p in self.facts if ctx.fact(p.key, p.id) is None))


class ReactOnceSuggestor(SuggestorBase):
    """For every seed, proposes the hypothesis `hypothesis-{seed id}` once."""

    def __init__(self, name: str = "react-once", *, confidence: float = 0.8) -> None:
        self.name = name
        self.dependencies = (SEEDS,)
        self.confidence = confidence

    def accepts(self, ctx: ContextView) -> bool:
        return any(ctx.fact(HYPOTHESES, self._id(seed.id)) is None for seed in ctx.get(SEEDS))

    async def execute(self, ctx: ContextView) -> AgentEffect:
        own = self.provenance()
        return AgentEffect(
            tuple(
                ProposedFact(
                    HYPOTHESES,
                    self._id(seed.id),
                    f"Hypothesis about {seed.content}",
                    self.confidence,
                    own,
                    {"seed": seed.id},
                )
                for seed in ctx.get(SEEDS)
                if ctx.fact(HYPOTHESES, self._id(seed.id)) is None
            )
        )

    @staticmethod
    def _id(seed_id: str) -> str:
        return f"hypothesis-{seed_id}"
