"""The engine kernel: context, promotion gate, convergence loop, budgets, invariants.

It implements the suggestor contract of docs/architecture.md §7.

Public surface:
- the contract: `Suggestor` (protocol), `SyncSuggestor` (one the engine runs inline),
  `SuggestorBase`, `ContextKey`, `BUILTIN_KEYS`,
  `ContextView`, `ProposedFact`, `AgentEffect`, `Provenance`, `Fact`, `PromotionRecord`;
  `canonical_json`, `freeze_json`, `fact_to_data`, `fact_from_data`;
  `json_problem` (why a value is not JSON data, as the promotion gate words it);
- the loop: `Engine` (`on_error`: `OnError`), `Context`, `RunResult`, `StopReason`,
  `StopNote` (why a run stopped, as data), `EngineState`, `PendingProposal`, `HitlPause`;
- limits and gates: `Budget`, `UsageMeter`, `UsageTotals`, `PromotionPolicy`,
  `PromotionGate`, `Invariant`, `InvariantClass`;
- events: `EngineEvent` (one of `RunStarted`, `CycleStarted`, `SuggestorStarted`,
  `SuggestorFinished`, `SuggestorFailed`, `FactPromoted`, `ProposalRejected`,
  `ProposalPending`, `ProposalDecided`, `HitlPaused`, `InvariantChecked`, `CycleFinished`,
  `RunFinished`),
  `Timing`, `EventSink`, `ENGINE_EVENT_ADAPTER`, `deterministic_dump`;
- reference suggestors: `SeedSuggestor`, `ReactOnceSuggestor`;
- the collector: `freeze_alive` (what a process keeps to its end, frozen for good).
"""

from __future__ import annotations

from converge_dsl._collector import freeze_alive
from converge_dsl.engine._data import json_problem
from converge_dsl.engine.budget import Budget, StopReason, UsageMeter, UsageTotals
from converge_dsl.engine.context import Context
from converge_dsl.engine.engine import Engine, OnError
from converge_dsl.engine.events import (
    ENGINE_EVENT_ADAPTER,
    CycleFinished,
    CycleStarted,
    EngineEvent,
    EventSink,
    FactPromoted,
    HitlPaused,
    InvariantChecked,
    ProposalDecided,
    ProposalPending,
    ProposalRejected,
    RunFinished,
    RunStarted,
    SuggestorFailed,
    SuggestorFinished,
    SuggestorStarted,
    Timing,
    deterministic_dump,
)
from converge_dsl.engine.invariants import Invariant, InvariantClass
from converge_dsl.engine.policy import PromotionGate, PromotionPolicy
from converge_dsl.engine.reference import ReactOnceSuggestor, SeedSuggestor, SuggestorBase
from converge_dsl.engine.state import (
    EngineState,
    HitlPause,
    PendingProposal,
    RunResult,
    fact_from_data,
    fact_to_data,
)
from converge_dsl.engine.stops import StopNote
from converge_dsl.engine.types import (
    AgentEffect,
    ContextKey,
    ContextView,
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
    Suggestor,
    SyncSuggestor,
    canonical_json,
    freeze_json,
)
from converge_dsl.keys import BUILTIN_KEYS

__all__ = [
    "BUILTIN_KEYS",
    "ENGINE_EVENT_ADAPTER",
    "AgentEffect",
    "Budget",
    "Context",
    "ContextKey",
    "ContextView",
    "CycleFinished",
    "CycleStarted",
    "Engine",
    "EngineEvent",
    "EngineState",
    "EventSink",
    "Fact",
    "FactPromoted",
    "HitlPause",
    "HitlPaused",
    "Invariant",
    "InvariantChecked",
    "InvariantClass",
    "OnError",
    "PendingProposal",
    "PromotionGate",
    "PromotionPolicy",
    "PromotionRecord",
    "ProposalDecided",
    "ProposalPending",
    "ProposalRejected",
    "ProposedFact",
    "Provenance",
    "ReactOnceSuggestor",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "SeedSuggestor",
    "StopNote",
    "StopReason",
    "Suggestor",
    "SuggestorBase",
    "SuggestorFailed",
    "SuggestorFinished",
    "SuggestorStarted",
    "SyncSuggestor",
    "Timing",
    "UsageMeter",
    "UsageTotals",
    "canonical_json",
    "deterministic_dump",
    "fact_from_data",
    "fact_to_data",
    "freeze_alive",
    "freeze_json",
    "json_problem",
]
