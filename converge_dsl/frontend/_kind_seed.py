"""The `seed` suggestor kind's front end: its typed spec and its registration.

What a kind carries and how it is registered: docs/architecture.md §16.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend._kinds import (
    DataSite,
    GraphStyle,
    ProposalSpec,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
)
from converge_dsl.sandbox import CONTEXT_NAMES


class SeedSpec(SuggestorSpec):
    """A `seed` suggestor: fixed `facts` (templated id and content) proposed to one target."""

    __slots__ = ()

    @property
    def facts(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(self.raw.get("facts") or ())

    @property
    def proposals(self) -> tuple[ProposalSpec, ...]:
        """Its facts, typed; each goes to its target."""
        return ProposalSpec.each((*self.path, "facts"), self.facts, self.targets[0])

    def proposal_specs(self) -> tuple[ProposalSpec, ...]:
        return self.proposals

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        found = [
            (("facts", j, field), fact.get(field), CONTEXT_NAMES, False)
            for j, fact in enumerate(self.facts)
            for field in ("id", "content")
        ]
        return (*super().templates(extra), *self.sites(extra, found))

    def data_sites(self) -> tuple[DataSite, ...]:
        return tuple(
            DataSite(self.targets[0], (*self.path, "facts", j), fact["data"], False)
            for j, fact in enumerate(self.facts)
            if "data" in fact
        )

    def content_items(self) -> tuple[tuple[JsonPath, Any], ...]:
        return tuple(((*self.path, "facts", j), fact) for j, fact in enumerate(self.facts))


def parse_seed(path: JsonPath, raw: Mapping[str, Any]) -> SeedSpec:
    return SeedSpec.common("seed", path, raw, (str(raw.get("target", "seeds")),))


SEED = SuggestorKind(
    "seed",
    "seedSuggestor",
    None,
    parse_seed,
    (),
    "converge_dsl.compiler._kinds:build_seed",
    GraphStyle("#dcfce7", "#16a34a", "#14532d", "box", "seed"),
)
