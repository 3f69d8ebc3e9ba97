"""Agent suggestors: the turn loop, tools, contributors, compaction, the span summarizer.

Public surface:
- `compile_agent(data, path, ctx) -> AgentSuggestor` — the builder of kind `agent`.
- `parse_agent(data, path, ctx) -> AgentSpec` — the typed agent, without models (used by `plan`).
- `TurnMachine` (sans-I/O turn loop); `drive`, `Reducer` (its async driver, compaction filler).
- `SpanSummarizer` protocol, `ModelSummarizer`, `side_call`; `CompactionPolicy`, `SummaryBudget`.
- `simulate(spec, ...)` — the `plan` simulation; `AGENT_CHECKS` — semantic checks (CD2xx).
- events: `AgentTurnStarted`, `ContributorFired`, `ToolCalled`, `Compaction`, `SpanCleared`,
  `SummaryTaken`, `SummaryFallback`, `AgentFinished`.
"""

from __future__ import annotations

from converge_dsl.agents._agent import AgentError, AgentSuggestor, compile_agent
from converge_dsl.agents._events import (
    AgentFinished,
    AgentTurnStarted,
    Compaction,
    ContributorFired,
    SpanCleared,
    SummaryFallback,
    SummaryTaken,
    ToolCalled,
)
from converge_dsl.agents._loop import Reducer, drive
from converge_dsl.agents._machine import TurnMachine
from converge_dsl.agents._policy import (
    CompactionPolicy,
    SummaryBudget,
    TokenCounter,
    default_token_counter,
)
from converge_dsl.agents._spec import AgentSpec, parse_agent
from converge_dsl.agents._summarizer import ModelSummarizer, SpanSummarizer, side_call

__all__ = [
    "AgentError",
    "AgentFinished",
    "AgentSpec",
    "AgentSuggestor",
    "AgentTurnStarted",
    "Compaction",
    "CompactionPolicy",
    "ContributorFired",
    "ModelSummarizer",
    "Reducer",
    "SpanCleared",
    "SpanSummarizer",
    "SummaryBudget",
    "SummaryFallback",
    "SummaryTaken",
    "TokenCounter",
    "ToolCalled",
    "TurnMachine",
    "compile_agent",
    "default_token_counter",
    "drive",
    "parse_agent",
    "side_call",
]
