"""Semantic checks of `agent` suggestors (run after the JSON Schema passed).

Each check is `(agents, source_map) -> Iterator[Diagnostic]` over the
pipeline's agents, typed (`AgentSuggestorSpec`). Unknown tool names,
undeclared contributor keys and undeclared summarizer models are already
caught by the schema (`tools` is an enum) and by the front end's `known_keys`
/ `known_models`; these checks add what only the agent's arithmetic reveals.

Codes (`converge_dsl.codes`, documented in docs/errors.md): `COMPACTION_ORDER`
(error), `SUMMARIZER_NEVER_CALLED` (the arithmetic is shown),
`REMINDER_NEVER_FIRES`, `TURNS_NEVER_CLEARED`, `AGENT_CANNOT_PROPOSE` (warnings).
`agent_diagnostics` runs them all; `agent_checks(facts)` runs them over a
pipeline's agents, and the `agent` kind (`_kind.AGENT`) names it as one of its
checks (a reference, imported on first use). Nothing here imports the turn loop, the engine or the
models (the summarizer budget's arithmetic lives in `_summary_budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from converge_dsl import codes
from converge_dsl.agents._kind import AgentSuggestorSpec, agent_specs
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity
from converge_dsl.frontend import PipelineFacts
from converge_dsl.frontend.document import SourceMap

AgentCheck = Callable[[Sequence[AgentSuggestorSpec], SourceMap], Iterator[Diagnostic]]


def _warn(code: str, message: str, source_map: SourceMap, path: JsonPath, hint: str) -> Diagnostic:
    return Diagnostic.at(
        code, message, source_map.span(path), path=path, hint=hint, severity=Severity.WARNING
    )


def compaction_order(
    agents: Sequence[AgentSuggestorSpec], source_map: SourceMap
) -> Iterator[Diagnostic]:
    for agent in agents:
        compaction = agent.compaction
        threshold, emergency = compaction.threshold, compaction.emergency
        if emergency < threshold:
            where = (*compaction.path, "emergency")
            yield Diagnostic.at(
                codes.COMPACTION_ORDER,
                f"compaction.emergency {emergency:g} is below compaction.threshold {threshold:g}",
                source_map.span(where),
                path=where,
                hint="emergency compaction must come at or after the normal threshold",
            )


def summarizer_budget(
    agents: Sequence[AgentSuggestorSpec], source_map: SourceMap
) -> Iterator[Diagnostic]:
    for agent in agents:
        summarizer = agent.summarizer
        if summarizer is None:
            continue
        why = summarizer.budget.never_calls()
        if why is not None:
            yield _warn(
                codes.SUMMARIZER_NEVER_CALLED,
                f"this summarizer can never be called: {why}",
                source_map,
                (*summarizer.path, "budget"),
                "every cleared span will get the stub; raise max_calls or max_input_chars, "
                "or lower cost_floor_multiple",
            )


def turn_cadence(
    agents: Sequence[AgentSuggestorSpec], source_map: SourceMap
) -> Iterator[Diagnostic]:
    for agent in agents:
        max_turns = agent.max_turns
        for contributor in agent.contributors:
            every = contributor.every
            if contributor.kind == "reminder" and every >= max_turns:
                yield _warn(
                    codes.REMINDER_NEVER_FIRES,
                    f"reminder every {every} turns never fires within max_turns {max_turns}",
                    source_map,
                    (*contributor.path, "every"),
                    f"turn 0 is skipped; use every < {max_turns}, or 0 to disable it explicitly",
                )
        summarizer = agent.summarizer
        older = 0 if summarizer is None else summarizer.clear_turns_older_than
        if summarizer is not None and older >= max_turns:
            yield _warn(
                codes.TURNS_NEVER_CLEARED,
                f"clear_turns_older_than {older} >= max_turns {max_turns}: no turn ever gets "
                "old enough, so only emergency compaction clears turns",
                source_map,
                (*summarizer.path, "clear_turns_older_than"),
                f"use a value below {max_turns}",
            )


def can_propose(
    agents: Sequence[AgentSuggestorSpec], source_map: SourceMap
) -> Iterator[Diagnostic]:
    for agent in agents:
        if "context.propose" not in agent.tools:  # left out: every tool, context.propose too
            yield _warn(
                codes.AGENT_CANNOT_PROPOSE,
                f"agent {agent.name!r} cannot propose facts (no context.propose tool)",
                source_map,
                (*agent.path, "tools"),
                "add context.propose to tools, or the agent's effect is always empty",
            )


def tool_choice_available(
    agents: Sequence[AgentSuggestorSpec], source_map: SourceMap
) -> Iterator[Diagnostic]:
    """A `tool_choice` that names a tool the agent lacks (or `required` without tools)."""
    for agent in agents:
        if agent.tool_choice is None:
            continue
        choice, where, tools = agent.tool_choice.choice, agent.tool_choice.path, agent.tools
        if choice == "auto" or (choice == "required" and tools):
            continue
        if choice != "required" and choice in tools:
            continue
        wanted = "a tool" if choice == "required" else f"tool {choice!r}"
        yield Diagnostic.at(
            codes.AGENT_TOOL_CHOICE_UNAVAILABLE,
            f"tool_choice asks agent {agent.name!r} to call {wanted}, which its tools "
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


def agent_diagnostics(
    agents: Sequence[AgentSuggestorSpec], source_map: SourceMap
) -> Iterator[Diagnostic]:
    """Every agent check, in order, over the pipeline's agents (`_kind.agent_specs`)."""
    for check in AGENT_CHECKS:
        yield from check(agents, source_map)


def agent_checks(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """The agents' checks over the pipeline's agents (CD4xx)."""
    yield from agent_diagnostics(agent_specs(facts.specs), facts.source_map)
