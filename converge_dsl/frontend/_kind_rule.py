"""The `rule` suggestor kind's front end: its typed spec and its registration.

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


class RuleSpec(SuggestorSpec):
    """A `rule` suggestor: proposes each `emit` entry (`proposals`, typed) when its `when`
    holds; the emits' keys are its targets."""

    _fields = (*SuggestorSpec._fields, "proposals")
    __slots__ = ("proposals",)

    def __init__(
        self,
        head: SpecHead,
        *,
        proposals: tuple[ProposalSpec, ...],
        missing: tuple[JsonPath, ...] = (),
    ) -> None:
        super().__init__(*head, missing=missing)
        self.proposals = proposals

    def proposal_specs(self) -> tuple[ProposalSpec, ...]:
        return self.proposals

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        found: list[tuple[JsonPath, object, frozenset[str], bool]] = []
        for j, emit in enumerate(self.proposals):
            found += [
                (("emit", j, field), value, CONTEXT_NAMES, False)
                for field, value in (
                    ("id", emit.id),
                    ("content", emit.content),
                    ("confidence", emit.confidence),
                )
            ]
            found.append((("emit", j, "data"), emit.data, CONTEXT_NAMES, True))
        return (*super().templates(extra), *self.sites(extra, found))

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        emits = tuple(((*emit.path, "key"), emit.key) for emit in self.proposals)
        return (*self.dependency_references(), *emits)

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return ()

    def data_sites(self) -> tuple[DataSite, ...]:
        return tuple(
            DataSite(emit.key, emit.path, emit.data, True)
            for emit in self.proposals
            if isinstance(emit.data, str)
        )

    def content_items(self) -> tuple[tuple[JsonPath, object], ...]:
        return tuple((emit.path, emit.content) for emit in self.proposals)


def parse_rule(path: JsonPath, raw: Mapping[str, Any]) -> RuleSpec:
    missing: list[JsonPath] = []
    proposals = ProposalSpec.each((*path, "emit"), raw.get("emit") or (), None, missing)
    targets = tuple(dict.fromkeys(emit.key for emit in proposals))
    return RuleSpec(
        SuggestorSpec.head("rule", path, raw, targets),
        proposals=proposals,
        missing=tuple(missing),
    )


RULE = SuggestorKind(
    "rule",
    "ruleSuggestor",
    None,
    parse_rule,
    (),
    "converge_dsl.compiler._kinds:build_rule",
    GraphStyle("#dbeafe", "#2563eb", "#1e3a8a", "box", "rule"),
)
