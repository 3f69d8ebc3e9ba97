"""Semantic checks of `agent` suggestors (run after the JSON Schema passed).

Each check is `(data, source_map) -> Iterator[Diagnostic]` over the whole
pipeline data. Unknown tool names, undeclared contributor keys and undeclared
summarizer models are already caught by the schema (`tools` is an enum) and
by the front end's `known_keys` / `known_models`; these checks add what only
the agent's arithmetic reveals.

| code  | severity | meaning                                                                 |
|-------|----------|-------------------------------------------------------------------------|
| CD220 | error    | `compaction.emergency` is below `compaction.threshold`                  |
| CD320 | warning  | the summarizer budget can never allow a call (the arithmetic is shown)  |
| CD321 | warning  | a reminder's `every` is >= `max_turns`: it never fires                  |
| CD322 | warning  | `clear_turns_older_than` >= `max_turns`: only emergency compaction runs |
| CD323 | warning  | the agent has no `context.propose` tool: it can never propose a fact    |
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from converge_dsl.agents._policy import SummaryBudget
from converge_dsl.agents._tools import ALL_TOOLS
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity
from converge_dsl.frontend.document import SourceMap

AgentCheck = Callable[[Mapping[str, Any], SourceMap], Iterator[Diagnostic]]


def _agents(data: Mapping[str, Any]) -> Iterator[tuple[JsonPath, Mapping[str, Any]]]:
    for index, suggestor in enumerate(data.get("suggestors") or ()):
        if isinstance(suggestor, Mapping) and suggestor.get("kind") == "agent":
            yield ("suggestors", index), suggestor


def _warn(code: str, message: str, source_map: SourceMap, path: JsonPath, hint: str) -> Diagnostic:
    return Diagnostic.at(
        code, message, source_map.span(path), path=path, hint=hint, severity=Severity.WARNING
    )


def compaction_order(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    for path, agent in _agents(data):
        compaction = agent.get("compaction") or {}
        threshold = float(compaction.get("threshold", 0.8))
        emergency = float(compaction.get("emergency", 0.95))
        if emergency < threshold:
            where = (*path, "compaction", "emergency")
            yield Diagnostic.at(
                "CD220",
                f"compaction.emergency {emergency:g} is below compaction.threshold {threshold:g}",
                source_map.span(where),
                path=where,
                hint="emergency compaction must come at or after the normal threshold",
            )


def summarizer_budget(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    for path, agent in _agents(data):
        raw = (agent.get("summarizer") or {}).get("budget")
        if raw is None:
            continue
        budget = SummaryBudget(
            max_calls=int(raw["max_calls"]),
            max_input_chars=int(raw["max_input_chars"]),
            timeout_s=float(raw["timeout_s"]),
            expected_summary_bytes=int(raw["expected_summary_bytes"]),
            cost_floor_multiple=float(raw["cost_floor_multiple"]),
        )
        why = budget.never_calls()
        if why is not None:
            yield _warn(
                "CD320",
                f"this summarizer can never be called: {why}",
                source_map,
                (*path, "summarizer", "budget"),
                "every cleared span will get the stub; raise max_calls or max_input_chars, "
                "or lower cost_floor_multiple",
            )


def turn_cadence(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    for path, agent in _agents(data):
        max_turns = int(agent.get("max_turns", 10))
        for j, contributor in enumerate(agent.get("contributors") or ()):
            every = int(contributor.get("every", 0))
            if contributor.get("kind") == "reminder" and every >= max_turns:
                yield _warn(
                    "CD321",
                    f"reminder every {every} turns never fires within max_turns {max_turns}",
                    source_map,
                    (*path, "contributors", j, "every"),
                    f"turn 0 is skipped; use every < {max_turns}, or 0 to disable it explicitly",
                )
        older = (agent.get("summarizer") or {}).get("clear_turns_older_than")
        if older is not None and int(older) >= max_turns:
            yield _warn(
                "CD322",
                f"clear_turns_older_than {older} >= max_turns {max_turns}: no turn ever gets "
                "old enough, so only emergency compaction clears turns",
                source_map,
                (*path, "summarizer", "clear_turns_older_than"),
                f"use a value below {max_turns}",
            )


def can_propose(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    for path, agent in _agents(data):
        tools = agent.get("tools", ALL_TOOLS)
        if "context.propose" not in tools:
            yield _warn(
                "CD323",
                f"agent {agent.get('name')!r} cannot propose facts (no context.propose tool)",
                source_map,
                (*path, "tools"),
                "add context.propose to tools, or the agent's effect is always empty",
            )


AGENT_CHECKS: tuple[AgentCheck, ...] = (
    compaction_order,
    summarizer_budget,
    turn_cadence,
    can_propose,
)


def agent_diagnostics(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    """Every agent check, in order."""
    for check in AGENT_CHECKS:
        yield from check(data, source_map)
