"""The typed, immutable form of an `agent` suggestor's YAML (docs/architecture.md §9).

`parse_agent` turns schema-valid data into an `AgentSpec`, compiling every
template once through the `CompileContext` (so a template error points at
its YAML node). It needs no model: `plan` uses it too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from converge_dsl.agents._policy import CompactionPolicy
from converge_dsl.agents._summary_budget import SummaryBudget
from converge_dsl.agents._tools import ALL_TOOLS
from converge_dsl.compiler import CompileContext, CompiledTemplate
from converge_dsl.diagnostics import JsonPath

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
    kind: Literal["reminder", "plan", "facts", "template"]
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


def _contributor(
    data: Mapping[str, Any], index: int, path: JsonPath, ctx: CompileContext
) -> ContributorSpec:
    kind = data["kind"]
    field = "text" if kind == "reminder" else "template"
    source = data.get(field)
    return ContributorSpec(
        name=str(data.get("name") or f"{kind}-{index}"),
        kind=kind,
        role=data.get("role", "user"),
        persist=bool(data.get("persist", True)),
        every=int(data.get("every", 0)),
        keys=tuple(str(k) for k in data.get("keys", ())),
        template=(
            None
            if source is None
            else ctx.template(str(source), (*path, field), extra=CONTRIBUTOR_NAMES)
        ),
    )


def _summarizer(data: Mapping[str, Any], path: JsonPath, ctx: CompileContext) -> SummarizerSpec:
    budget = data["budget"]
    prompt = data.get("prompt")
    return SummarizerSpec(
        model=str(data["model"]),
        clear_turns_older_than=int(data["clear_turns_older_than"]),
        budget=SummaryBudget(
            max_calls=int(budget["max_calls"]),
            max_input_chars=int(budget["max_input_chars"]),
            timeout_s=float(budget["timeout_s"]),
            expected_summary_bytes=int(budget["expected_summary_bytes"]),
            cost_floor_multiple=float(budget["cost_floor_multiple"]),
        ),
        prompt=ctx.template(
            str(prompt or DEFAULT_SUMMARY_PROMPT), (*path, "prompt"), extra=frozenset({"span"})
        ),
        # A custom prompt is versioned by its text, so the audit trail tells prompts apart.
        prompt_version=(
            "custom-" + hashlib.sha256(str(prompt).encode()).hexdigest()[:12]
            if prompt
            else DEFAULT_PROMPT_VERSION
        ),
    )


def parse_agent(data: Mapping[str, Any], path: JsonPath, ctx: CompileContext) -> AgentSpec:
    """Build the `AgentSpec` of the (schema-valid) agent suggestor at `path`."""
    compaction = data.get("compaction") or {}
    summarizer_data = data.get("summarizer")
    summarizer = (
        None
        if summarizer_data is None
        else _summarizer(summarizer_data, (*path, "summarizer"), ctx)
    )
    return AgentSpec(
        name=str(data["name"]),
        model=str(data["model"]),
        target=str(data["target"]),
        goal=ctx.template(str(data["goal"]), (*path, "goal")),
        max_turns=int(data.get("max_turns", 10)),
        policy=CompactionPolicy(
            window=int(data.get("context_window", 8000)),
            threshold=float(compaction.get("threshold", 0.8)),
            emergency=float(compaction.get("emergency", 0.95)),
            keep_turns=summarizer.clear_turns_older_than if summarizer else DEFAULT_KEEP_TURNS,
        ),
        tools=tuple(str(t) for t in data.get("tools", ALL_TOOLS)),
        contributors=tuple(
            _contributor(c, i, (*path, "contributors", i), ctx)
            for i, c in enumerate(data.get("contributors") or ())
        ),
        summarizer=summarizer,
        tool_choice=_tool_choice(data.get("tool_choice")),
        tool_choice_first_only=(
            isinstance(data.get("tool_choice"), Mapping)
            and data["tool_choice"].get("turns") == "first"
        ),
    )


def _tool_choice(raw: Any) -> str | None:
    """The choice of a (schema-valid) `tool_choice`: a value, or `{choice, turns}`."""
    if isinstance(raw, Mapping):
        return str(raw["choice"])
    return None if raw is None else str(raw)
