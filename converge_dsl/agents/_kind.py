"""The `agent` suggestor kind: its typed spec, checks, builder and registration.

Light on purpose (docs/architecture.md §16): validate imports this module (not
the turn loop) for a pipeline with an agent; the checks and the builder import
their modules on first call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath
from converge_dsl.frontend import GraphStyle, SuggestorKind, SuggestorSpec, TemplateSite
from converge_dsl.sandbox import CONTEXT_NAMES

if TYPE_CHECKING:
    from converge_dsl.frontend import PipelineFacts

TURN_NAMES = CONTEXT_NAMES | {"goal", "turn", "conversation"}
# An agent's tools when it names none (schemas/pipeline.v1.json).
DEFAULT_TOOLS = ("context.read", "context.propose", "finish")
# A summarizer prompt is rendered with the cleared span only (agents/_summarizer.py).
SUMMARY_NAMES = frozenset({"span"})


class AgentSuggestorSpec(SuggestorSpec):
    """An `agent` suggestor: a turn loop towards `goal`, proposing to its `target`."""

    __slots__ = ()

    @property
    def contributors(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(self.raw.get("contributors") or ())

    @property
    def summarizer(self) -> Mapping[str, Any]:
        summarizer: Mapping[str, Any] = self.raw.get("summarizer") or {}
        return summarizer

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        found: list[tuple[JsonPath, object, frozenset[str], bool]] = [
            (("goal",), self.raw.get("goal"), CONTEXT_NAMES, False)
        ]
        found += [
            (("contributors", j, field), contributor.get(field), TURN_NAMES, False)
            for j, contributor in enumerate(self.contributors)
            for field in ("text", "template")
        ]
        found.append(
            (("summarizer", "prompt"), self.summarizer.get("prompt"), SUMMARY_NAMES, False)
        )
        return (*super().templates(extra), *self.sites(extra, found))

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        contributed = tuple(
            ((*self.path, "contributors", j, "keys", i), key)
            for j, contributor in enumerate(self.contributors)
            for i, key in enumerate(contributor.get("keys") or ())
        )
        return (*super().key_references(), *contributed)

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        model = self.summarizer.get("model")
        summarizer = (((*self.path, "summarizer", "model"), model),) if model is not None else ()
        return (*super().model_references(), *summarizer)

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(self.raw.get("tools", DEFAULT_TOOLS))

    def contributor_names(self) -> tuple[str, ...]:
        """Each contributor as `name (kind)`, its default name `<kind>-<index>`."""
        named = (
            (c.get("name") or f"{c['kind']}-{j}", c["kind"])
            for j, c in enumerate(self.contributors)
        )
        return tuple(f"{name} ({kind})" for name, kind in named)

    def side_reads(self) -> tuple[str, ...]:
        keys = (str(key) for c in self.contributors for key in c.get("keys") or ())
        return tuple(dict.fromkeys(keys))

    def side_calls(self) -> tuple[tuple[str, str], ...]:
        model = self.summarizer.get("model")
        return (("summarizer", str(model)),) if model is not None else ()

    def parts(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        found = [("tools", self.tools), ("contributors", self.contributor_names())]
        return tuple((label, items) for label, items in found if items)

    def details(self) -> tuple[tuple[str, str], ...]:
        found = [("tools", ", ".join(self.tools) or "none")]
        if self.contributors:
            found.append(("contributors", ", ".join(self.contributor_names())))
        summarizer = self.summarizer
        if summarizer:
            older = summarizer.get("clear_turns_older_than")
            clears = f", clears turns older than {older}" if older is not None else ""
            found.append(("summarizer", f"model {summarizer.get('model')}{clears}"))
        return (*super().details(), *tuple(found))


def parse_agent_spec(path: JsonPath, raw: Mapping[str, Any]) -> AgentSuggestorSpec:
    return AgentSuggestorSpec.common("agent", path, raw, (str(raw.get("target", "")),))


def unique_contributors(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Contributor names (default `<kind>-<index>`) are unique within an agent."""
    for spec in facts.specs:
        if not isinstance(spec, AgentSuggestorSpec):
            continue
        named = [
            ((*spec.path, "contributors", j, "name"), c.get("name", f"{c['kind']}-{j}"))
            for j, c in enumerate(spec.contributors)
        ]
        yield from facts.duplicates(named, codes.DUPLICATE_CONTRIBUTOR, "contributor")


def agent_checks(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """The agents' arithmetic checks (CD4xx; `_checks`, imported on first use)."""
    from converge_dsl.agents._checks import agent_diagnostics

    yield from agent_diagnostics(facts.data, facts.source_map)


AGENT = SuggestorKind(
    "agent",
    "agentSuggestor",
    None,
    parse_agent_spec,
    (unique_contributors, agent_checks),
    "converge_dsl.agents._agent:compile_agent",
    GraphStyle("#ffedd5", "#ea580c", "#7c2d12", "box", "agent"),
    operation="invoke_agent",
)
