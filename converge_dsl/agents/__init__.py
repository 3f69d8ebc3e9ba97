"""Agent suggestors: the turn loop, tools, contributors, compaction, the span summarizer.

Public surface:
- `compile_agent(spec, ctx)` -> `AgentSuggestor` — the builder of kind `agent` (from its
  `AgentSuggestorSpec`);
  `AgentError`, the failure of an agent's run.
- `parse_agent(data, path, ctx)` -> `AgentSpec` — the typed agent, without models (used by `plan`).
- `TokenCounter`, `default_token_counter` — how turns are measured (about 4 characters a token).
- `TurnMachine` (sans-I/O turn loop); `drive`, `Reducer` (its async driver, compaction filler).
- `SpanSummarizer` protocol, `ModelSummarizer`, `side_call`; `CompactionPolicy`, `SummaryBudget`.
- `plan_pipeline(document, inputs=...)` -> [`Plan`] — what `converge-dsl plan` shows: each
  agent's turns simulated by `simulate(spec, ...)` without a model; `MAX_ASSUMED_CHARS` bounds
  the assumed reply and tool-result sizes.
- `AGENT` — the `agent` suggestor kind (`SuggestorKind`: its spec `AgentSuggestorSpec`, its
  checks CD4xx, its builder), registered by `converge_dsl.validation.KINDS`.
- events: `AgentTurnStarted`, `ContributorFired`, `ToolCalled`, `Compaction`, `SpanCleared`
  (its `ClearedTurn`s of `MessageLine`s of `PartLine`s: `TextPartLine`, `ToolCallPartLine`,
  `ToolResultPartLine`), `SummaryTaken`, `SummaryFallback`, `AgentFinished`.

Names are imported on first use (PEP 562): the agent checks
(`AGENT`'s checks) must not pay for the turn loop's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_names

if TYPE_CHECKING:
    from converge_dsl.agents._agent import (
        AgentError,
        AgentSuggestor,
        compile_agent,
    )
    from converge_dsl.agents._events import (
        AgentFinished,
        AgentTurnStarted,
        ClearedTurn,
        Compaction,
        ContributorFired,
        MessageLine,
        PartLine,
        SpanCleared,
        SummaryFallback,
        SummaryTaken,
        TextPartLine,
        ToolCalled,
        ToolCallPartLine,
        ToolResultPartLine,
    )
    from converge_dsl.agents._kind import AGENT, AgentSuggestorSpec
    from converge_dsl.agents._loop import (
        Reducer,
        drive,
    )
    from converge_dsl.agents._machine import (
        TurnMachine,
    )
    from converge_dsl.agents._planner import (
        MAX_ASSUMED_CHARS,
        Plan,
        plan_pipeline,
        simulate,
    )
    from converge_dsl.agents._policy import (
        CompactionPolicy,
        TokenCounter,
        default_token_counter,
    )
    from converge_dsl.agents._spec import (
        AgentSpec,
        parse_agent,
    )
    from converge_dsl.agents._summarizer import (
        ModelSummarizer,
        SpanSummarizer,
        side_call,
    )
    from converge_dsl.agents._summary_budget import SummaryBudget

_WHERE: dict[str, str] = {
    "ClearedTurn": "converge_dsl.agents._events",
    "MessageLine": "converge_dsl.agents._events",
    "PartLine": "converge_dsl.agents._events",
    "TextPartLine": "converge_dsl.agents._events",
    "ToolCallPartLine": "converge_dsl.agents._events",
    "ToolResultPartLine": "converge_dsl.agents._events",
    "MAX_ASSUMED_CHARS": "converge_dsl.agents._planner",
    "Plan": "converge_dsl.agents._planner",
    "plan_pipeline": "converge_dsl.agents._planner",
    "simulate": "converge_dsl.agents._planner",
    "AgentError": "converge_dsl.agents._agent",
    "AgentFinished": "converge_dsl.agents._events",
    "AgentSpec": "converge_dsl.agents._spec",
    "AgentSuggestor": "converge_dsl.agents._agent",
    "AgentTurnStarted": "converge_dsl.agents._events",
    "Compaction": "converge_dsl.agents._events",
    "CompactionPolicy": "converge_dsl.agents._policy",
    "ContributorFired": "converge_dsl.agents._events",
    "ModelSummarizer": "converge_dsl.agents._summarizer",
    "Reducer": "converge_dsl.agents._loop",
    "SpanCleared": "converge_dsl.agents._events",
    "SpanSummarizer": "converge_dsl.agents._summarizer",
    "SummaryBudget": "converge_dsl.agents._summary_budget",
    "SummaryFallback": "converge_dsl.agents._events",
    "SummaryTaken": "converge_dsl.agents._events",
    "TokenCounter": "converge_dsl.agents._policy",
    "ToolCalled": "converge_dsl.agents._events",
    "TurnMachine": "converge_dsl.agents._machine",
    "AGENT": "converge_dsl.agents._kind",
    "AgentSuggestorSpec": "converge_dsl.agents._kind",
    "compile_agent": "converge_dsl.agents._agent",
    "default_token_counter": "converge_dsl.agents._policy",
    "drive": "converge_dsl.agents._loop",
    "parse_agent": "converge_dsl.agents._spec",
    "side_call": "converge_dsl.agents._summarizer",
}

__all__ = [
    "AGENT",
    "MAX_ASSUMED_CHARS",
    "AgentError",
    "AgentFinished",
    "AgentSpec",
    "AgentSuggestor",
    "AgentSuggestorSpec",
    "AgentTurnStarted",
    "ClearedTurn",
    "Compaction",
    "CompactionPolicy",
    "ContributorFired",
    "MessageLine",
    "ModelSummarizer",
    "PartLine",
    "Plan",
    "Reducer",
    "SpanCleared",
    "SpanSummarizer",
    "SummaryBudget",
    "SummaryFallback",
    "SummaryTaken",
    "TextPartLine",
    "TokenCounter",
    "ToolCallPartLine",
    "ToolCalled",
    "ToolResultPartLine",
    "TurnMachine",
    "compile_agent",
    "default_token_counter",
    "drive",
    "parse_agent",
    "plan_pipeline",
    "side_call",
    "simulate",
]

__getattr__ = lazy_names(__name__, _WHERE)
