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
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
)
from converge_dsl.sandbox import CONTEXT_NAMES


class RuleSpec(SuggestorSpec):
    """A `rule` suggestor: proposes each `emit` entry when its `when` holds; emits' keys are
    its targets."""

    __slots__ = ()

    @property
    def emits(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(self.raw.get("emit") or ())

    @property
    def proposals(self) -> tuple[ProposalSpec, ...]:
        """Its emits, typed."""
        return ProposalSpec.each((*self.path, "emit"), self.emits, None)

    def proposal_specs(self) -> tuple[ProposalSpec, ...]:
        return self.proposals

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        found: list[tuple[JsonPath, object, frozenset[str], bool]] = []
        for j, emit in enumerate(self.emits):
            found += [
                (("emit", j, field), emit.get(field), CONTEXT_NAMES, False)
                for field in ("id", "content", "confidence")
            ]
            found.append((("emit", j, "data"), emit.get("data"), CONTEXT_NAMES, True))
        return (*super().templates(extra), *self.sites(extra, found))

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        emits = tuple(
            ((*self.path, "emit", j, "key"), e["key"])
            for j, e in enumerate(self.emits)
            if isinstance(e.get("key"), str)
        )
        return (*super().key_references(), *emits)

    def data_sites(self) -> tuple[DataSite, ...]:
        return tuple(
            DataSite(emit["key"], (*self.path, "emit", j), emit["data"], True)
            for j, emit in enumerate(self.emits)
            if isinstance(emit.get("data"), str) and isinstance(emit.get("key"), str)
        )

    def content_items(self) -> tuple[tuple[JsonPath, Any], ...]:
        return tuple(((*self.path, "emit", j), emit) for j, emit in enumerate(self.emits))


def parse_rule(path: JsonPath, raw: Mapping[str, Any]) -> RuleSpec:
    emits = raw.get("emit") or ()
    targets = tuple(dict.fromkeys(str(e["key"]) for e in emits if isinstance(e.get("key"), str)))
    return RuleSpec.common("rule", path, raw, targets)


RULE = SuggestorKind(
    "rule",
    "ruleSuggestor",
    None,
    parse_rule,
    (),
    "converge_dsl.compiler._kinds:build_rule",
    GraphStyle("#dbeafe", "#2563eb", "#1e3a8a", "box", "rule"),
)
