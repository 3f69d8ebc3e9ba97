"""Semantic checks of `agent` suggestors (run after the JSON Schema passed).

Each check is `(data, source_map) -> Iterator[Diagnostic]` over the whole
pipeline data. Unknown tool names, undeclared contributor keys and undeclared
summarizer models are already caught by the schema (`tools` is an enum) and
by the front end's `known_keys` / `known_models`; these checks add what only
the agent's arithmetic reveals.

Codes (`converge_dsl.codes`, documented in docs/errors.md): `COMPACTION_ORDER`
(error), `SUMMARIZER_NEVER_CALLED` (the arithmetic is shown),
`REMINDER_NEVER_FIRES`, `TURNS_NEVER_CLEARED`, `AGENT_CANNOT_PROPOSE` (warnings).
`agent_diagnostics` runs them all; the `agent` kind (`_kind.AGENT`) carries it
as one of its checks. Nothing here imports the turn loop, the engine or the
models (the summarizer budget's arithmetic lives in `_summary_budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from converge_dsl import codes
from converge_dsl.agents._kind import DEFAULT_TOOLS
from converge_dsl.agents._summary_budget import SummaryBudget
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
                codes.COMPACTION_ORDER,
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
                codes.SUMMARIZER_NEVER_CALLED,
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
                    codes.REMINDER_NEVER_FIRES,
                    f"reminder every {every} turns never fires within max_turns {max_turns}",
                    source_map,
                    (*path, "contributors", j, "every"),
                    f"turn 0 is skipped; use every < {max_turns}, or 0 to disable it explicitly",
                )
        older = (agent.get("summarizer") or {}).get("clear_turns_older_than")
        if older is not None and int(older) >= max_turns:
            yield _warn(
                codes.TURNS_NEVER_CLEARED,
                f"clear_turns_older_than {older} >= max_turns {max_turns}: no turn ever gets "
                "old enough, so only emergency compaction clears turns",
                source_map,
                (*path, "summarizer", "clear_turns_older_than"),
                f"use a value below {max_turns}",
            )


def can_propose(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    for path, agent in _agents(data):
        tools = agent.get("tools")  # absent: every tool, context.propose included
        if tools is not None and "context.propose" not in tools:
            yield _warn(
                codes.AGENT_CANNOT_PROPOSE,
                f"agent {agent.get('name')!r} cannot propose facts (no context.propose tool)",
                source_map,
                (*path, "tools"),
                "add context.propose to tools, or the agent's effect is always empty",
            )


def tool_choice_available(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    """A `tool_choice` that names a tool the agent lacks (or `required` without tools)."""
    for path, agent in _agents(data):
        raw = agent.get("tool_choice")
        choice = raw.get("choice") if isinstance(raw, Mapping) else raw
        tools = agent.get("tools", DEFAULT_TOOLS)
        if choice is None or choice == "auto" or (choice == "required" and tools):
            continue
        if choice != "required" and choice in tools:
            continue
        where = (
            (*path, "tool_choice", "choice") if isinstance(raw, Mapping) else (*path, "tool_choice")
        )
        wanted = "a tool" if choice == "required" else f"tool {choice!r}"
        yield Diagnostic.at(
            codes.AGENT_TOOL_CHOICE_UNAVAILABLE,
            f"tool_choice asks agent {agent.get('name')!r} to call {wanted}, which its tools "
            f"({', '.join(tools) or 'none'}) do not offer",
            source_map.span(where),
            path=where,
            hint=f"add {choice if choice != 'required' else 'a tool'} to tools, or choose one of "
            "its tools (or auto)",
        )


AGENT_CHECKS: tuple[AgentCheck, ...] = (
    compaction_order,
    summarizer_budget,
    turn_cadence,
    can_propose,
    tool_choice_available,
)


def agent_diagnostics(data: Mapping[str, Any], source_map: SourceMap) -> Iterator[Diagnostic]:
    """Every agent check, in order."""
    for check in AGENT_CHECKS:
        yield from check(data, source_map)
