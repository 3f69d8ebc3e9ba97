"""Agent suggestors: the turn loop, tools, contributors, compaction, the span summarizer.

Public surface:
- `compile_agent(spec, ctx)` -> `AgentSuggestor` — the builder of kind `agent` (from its
  `AgentSuggestorSpec`);
  `AgentError`, the failure of an agent's run.
- `parse_agent(spec, ctx)` -> `AgentSpec` — an agent's typed spec with its templates compiled,
  without models (used by `plan`).
- `TokenCounter`, `default_token_counter` — how turns are measured (about 4 characters a token).
- `TurnMachine` (sans-I/O turn loop); `drive`, `Reducer` (its async driver, compaction filler).
- `SpanSummarizer` protocol, `ModelSummarizer`, `side_call`; `CompactionPolicy`, `SummaryBudget`.
- `plan_pipeline(document, inputs=...)` -> `PipelinePlan` (its `Plan`s and `PlanTotal`) —
  what `converge-dsl plan` shows: each agent's turns simulated by `simulate(spec, ...)`
  without calling a model (a scripted agent answered by its script), with the calls and
  tokens expected; `MAX_ASSUMED_CHARS` bounds the assumed reply and tool-result sizes.
- `AGENT` — the `agent` suggestor kind (`SuggestorKind`: its spec `AgentSuggestorSpec` with
  its parts `AgentContributor`, `AgentSummarizer`, `AgentCompaction`, `AgentToolChoice`; its
  checks CD4xx, its builder), registered by `converge_dsl.validation.KINDS`;
  `parse_agents(data)`, the typed agents of a pipeline's data.
- events: `AgentTurnStarted`, `ContributorFired`, `ToolCalled`, `Compaction`,
  `SpanCleared` (its `ClearedTurn`s of `MessageLine`s of `PartLine`s: `TextPartLine`,
  `ToolCallPartLine`, `ToolResultPartLine`), `SummaryTaken`, `SummaryFallback`, `AgentFinished`.

Names are imported on first use (PEP 562): the agent checks
(`AGENT`'s checks) must not pay for the turn loop's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.agents._agent import *  # noqa: F403
    from converge_dsl.agents._events import *  # noqa: F403
    from converge_dsl.agents._kind import *  # noqa: F403
    from converge_dsl.agents._loop import *  # noqa: F403
    from converge_dsl.agents._machine import *  # noqa: F403
    from converge_dsl.agents._planner import *  # noqa: F403
    from converge_dsl.agents._policy import *  # noqa: F403
    from converge_dsl.agents._spec import *  # noqa: F403
    from converge_dsl.agents._summarizer import *  # noqa: F403
    from converge_dsl.agents._summary_budget import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.agents._agent": ("AgentError", "AgentSuggestor", "compile_agent"),
            "converge_dsl.agents._events": (
                "AgentFinished",
                "AgentTurnStarted",
                "ClearedTurn",
                "Compaction",
                "ContributorFired",
                "MessageLine",
                "PartLine",
                "SpanCleared",
                "SummaryFallback",
                "SummaryTaken",
                "TextPartLine",
                "ToolCallPartLine",
                "ToolCalled",
                "ToolResultPartLine",
            ),
            "converge_dsl.agents._kind": (
                "AGENT",
                "AgentCompaction",
                "AgentContributor",
                "AgentSuggestorSpec",
                "AgentSummarizer",
                "AgentToolChoice",
                "parse_agents",
            ),
            "converge_dsl.agents._loop": ("Reducer", "drive"),
            "converge_dsl.agents._machine": ("TurnMachine",),
            "converge_dsl.agents._planner": (
                "MAX_ASSUMED_CHARS",
                "PipelinePlan",
                "Plan",
                "PlanTotal",
                "plan_pipeline",
                "simulate",
            ),
            "converge_dsl.agents._policy": (
                "CompactionPolicy",
                "TokenCounter",
                "default_token_counter",
            ),
            "converge_dsl.agents._spec": ("AgentSpec", "parse_agent"),
            "converge_dsl.agents._summarizer": ("ModelSummarizer", "SpanSummarizer", "side_call"),
            "converge_dsl.agents._summary_budget": ("SummaryBudget",),
        },
    )
