"""The typed, immutable form of an `agent` suggestor's YAML (docs/architecture.md §9).

`parse_agent` turns the agent's typed spec (`_kind.AgentSuggestorSpec`) into
an `AgentSpec`, compiling every template once through the `CompileContext` (so
a template error points at its YAML node). It needs no model: `plan` uses it
too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from converge_dsl.agents._kind import (
    SUMMARY_NAMES,
    AgentContributor,
    AgentSuggestorSpec,
    AgentSummarizer,
)
from converge_dsl.agents._policy import CompactionPolicy
from converge_dsl.agents._summary_budget import SummaryBudget
from converge_dsl.compiler import CompileContext, CompiledTemplate

CONTRIBUTOR_NAMES = frozenset({"goal", "turn", "conversation"})
DEFAULT_KEEP_TURNS = 4
DEFAULT_PROMPT_VERSION = "summary-v1"
DEFAULT_SUMMARY_PROMPT = (
    "Summarise the following agent turns in a few sentences. Keep decisions, facts found "
    "and open questions; drop chatter.\n\n{{ span }}"
)


@dataclass(frozen=True, slots=True)
class ContributorSpec:
    name: str
    kind: str  # reminder, plan, facts or template
    role: Literal["system", "user"]
    persist: bool
    every: int = 0
    keys: tuple[str, ...] = ()
    template: CompiledTemplate | None = None


@dataclass(frozen=True, slots=True)
class SummarizerSpec:
    model: str
    clear_turns_older_than: int
    budget: SummaryBudget
    prompt: CompiledTemplate
    prompt_version: str


@dataclass(frozen=True, slots=True)
class AgentSpec:
    name: str
    model: str
    target: str
    goal: CompiledTemplate
    max_turns: int
    policy: CompactionPolicy
    tools: tuple[str, ...]
    contributors: tuple[ContributorSpec, ...]
    summarizer: SummarizerSpec | None
    tool_choice: str | None = None  # auto, required or a tool name (None: the provider's)
    tool_choice_first_only: bool = False  # the choice applies to the first turn only

    def tool_choice_at(self, turn: int) -> str | None:
        """The tool choice the request of `turn` (0 = the first) is sent with."""
        return None if self.tool_choice_first_only and turn > 0 else self.tool_choice


def _contributor(contributor: AgentContributor, ctx: CompileContext) -> ContributorSpec:
    source = contributor.template
    return ContributorSpec(
        name=contributor.label,
        kind=contributor.kind,
        role="system" if contributor.role == "system" else "user",
        persist=contributor.persist,
        every=contributor.every,
        keys=contributor.keys,
        template=(
            None
            if source is None
            else ctx.template(
                source, (*contributor.path, contributor.template_field), extra=CONTRIBUTOR_NAMES
            )
        ),
    )


def _summarizer(summarizer: AgentSummarizer, ctx: CompileContext) -> SummarizerSpec:
    prompt = summarizer.prompt
    return SummarizerSpec(
        model=summarizer.model,
        clear_turns_older_than=summarizer.clear_turns_older_than,
        budget=summarizer.budget,
        prompt=ctx.template(
            prompt or DEFAULT_SUMMARY_PROMPT, (*summarizer.path, "prompt"), extra=SUMMARY_NAMES
        ),
        # A custom prompt is versioned by its text, so the audit trail tells prompts apart.
        prompt_version=(
            "custom-" + hashlib.sha256(prompt.encode()).hexdigest()[:12]
            if prompt
            else DEFAULT_PROMPT_VERSION
        ),
    )


def parse_agent(agent: AgentSuggestorSpec, ctx: CompileContext) -> AgentSpec:
    """The `AgentSpec` of an agent's typed spec, its templates compiled (needs no model)."""
    summarizer = None if agent.summarizer is None else _summarizer(agent.summarizer, ctx)
    compaction, choice = agent.compaction, agent.tool_choice
    return AgentSpec(
        name=agent.name,
        model=agent.model,
        target=agent.target,
        goal=ctx.template(agent.goal, (*agent.path, "goal")),
        max_turns=agent.max_turns,
        policy=CompactionPolicy(
            window=agent.context_window,
            threshold=compaction.threshold,
            emergency=compaction.emergency,
            keep_turns=summarizer.clear_turns_older_than if summarizer else DEFAULT_KEEP_TURNS,
        ),
        tools=agent.tools,
        contributors=tuple(_contributor(c, ctx) for c in agent.contributors),
        summarizer=summarizer,
        tool_choice=None if choice is None else choice.choice,
        tool_choice_first_only=choice is not None and choice.first_only,
    )
