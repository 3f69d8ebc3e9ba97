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
    SpecHead,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
)
from converge_dsl.sandbox import CONTEXT_NAMES

DEFAULT_TARGET = "seeds"


class SeedSpec(SuggestorSpec):
    """A `seed` suggestor: fixed `facts` (templated id and content) proposed to one target.

    `target` is the key as written (None: `seeds`, its one `targets` entry);
    `proposals` its facts, typed, each to that key.
    """

    _fields = (*SuggestorSpec._fields, "target", "proposals")
    __slots__ = ("proposals", "target")

    def __init__(
        self,
        head: SpecHead,
        *,
        target: str | None,
        proposals: tuple[ProposalSpec, ...],
        missing: tuple[JsonPath, ...] = (),
    ) -> None:
        super().__init__(*head, missing=missing)
        self.target = target
        self.proposals = proposals

    def proposal_specs(self) -> tuple[ProposalSpec, ...]:
        return self.proposals

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        found = [
            (("facts", j, field), value, CONTEXT_NAMES, False)
            for j, fact in enumerate(self.proposals)
            for field, value in (("id", fact.id), ("content", fact.content))
        ]
        return (*super().templates(extra), *self.sites(extra, found))

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return (*self.dependency_references(), *self.references("target", self.target))

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return ()

    def data_sites(self) -> tuple[DataSite, ...]:
        return tuple(
            DataSite(self.targets[0], fact.path, fact.data, False)
            for fact in self.proposals
            if fact.has_data
        )

    def content_items(self) -> tuple[tuple[JsonPath, object], ...]:
        return tuple((fact.path, fact.content) for fact in self.proposals)


def parse_seed(path: JsonPath, raw: Mapping[str, Any]) -> SeedSpec:
    target = raw.get("target")
    key = str(raw.get("target", DEFAULT_TARGET))
    missing: list[JsonPath] = []
    proposals = ProposalSpec.each((*path, "facts"), raw.get("facts") or (), key, missing)
    return SeedSpec(
        SuggestorSpec.head("seed", path, raw, (key,)),
        target=target if isinstance(target, str) else None,
        proposals=proposals,
        missing=tuple(missing),
    )


SEED = SuggestorKind(
    "seed",
    "seedSuggestor",
    None,
    parse_seed,
    (),
    "converge_dsl.compiler._kinds:build_seed",
    GraphStyle("#dcfce7", "#16a34a", "#14532d", "box", "seed"),
)
