"""`plan`: simulate an agent's first turns without calling a model.

The simulation drives the very `TurnMachine`, `Reducer` and contributors the
real agent uses, with a synthetic model (every reply is a tool call of the
assumed size), synthetic tool results, and a summarizer that answers at once
with `expected_summary_bytes` characters. Only sizes are assumed: the
compaction points, the contributor cadence and the summary budget decisions
are the real ones.

Assumed sizes are bounded by `MAX_ASSUMED_CHARS`, and each size is built once
(not once per turn): the turn machine measures real text.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from converge_dsl.agents._contributors import TurnEnv
from converge_dsl.agents._kind import parse_agents
from converge_dsl.agents._loop import Reducer, drive
from converge_dsl.agents._machine import TurnMachine
from converge_dsl.agents._policy import TokenCounter, default_token_counter, message_text
from converge_dsl.agents._spec import AgentSpec, parse_agent
from converge_dsl.agents._tools import TOOL_SPECS
from converge_dsl.compiler import RenderScopes, compile_context, compile_settings
from converge_dsl.diagnostics import did_you_mean
from converge_dsl.engine import Budget, UsageMeter
from converge_dsl.engine.context import Context
from converge_dsl.engine.types import ContextView, Fact, PromotionRecord
from converge_dsl.errors import UsageError
from converge_dsl.frontend import LoadedDocument
from converge_dsl.models.port import Message, ModelRequest, TextPart, ToolCallPart, ToolResultPart

# 4 M characters are about 1 M tokens: more than any model's context window.
MAX_ASSUMED_CHARS = 4_000_000


@dataclass(frozen=True, slots=True)
class PlannedSummary:
    reduction_id: str
    decision: str  # "call" or the fallback reason
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    turn: int
    contributors: tuple[tuple[str, bool], ...]  # (name, persisted)
    estimated_tokens: int
    compactions: tuple[dict[str, Any], ...] = ()
    summaries: tuple[PlannedSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    agent: str
    context_window: int
    threshold_tokens: float
    emergency_tokens: float
    turns: tuple[PlannedTurn, ...]
    status: str
    detail: str = ""
    assumptions: dict[str, int] = field(default_factory=dict)


class _InstantSummarizer:
    def __init__(self, size: int) -> None:
        self._text = "s" * size

    def model_id(self) -> str:
        return "plan:assumed"

    async def summarize(self, span_text: str) -> str:
        return self._text


def _check_size(chars: int) -> None:
    if chars > MAX_ASSUMED_CHARS:
        raise ValueError(f"assumed size {chars} exceeds {MAX_ASSUMED_CHARS} characters")


@functools.lru_cache(maxsize=8)
def sized_reply(chars: int) -> Message:
    """An assistant message with one tool call, measuring `chars` (or its minimum)."""
    _check_size(chars)
    call = ToolCallPart("plan", "context.read", {})
    base = len(message_text(Message("assistant", (call,))))
    return Message("assistant", (TextPart("r" * max(0, chars - base)), call))


@functools.lru_cache(maxsize=8)
def sized_result(chars: int) -> ToolResultPart:
    """A tool result whose tool message measures `chars` (or its minimum)."""
    _check_size(chars)
    base = len(message_text(Message("tool", (ToolResultPart("plan", ""),))))
    return ToolResultPart("plan", "t" * max(0, chars - base))


def _rows(events: Sequence[BaseModel]) -> list[PlannedTurn]:
    rows: dict[int, dict[str, Any]] = {}
    summaries: dict[str, PlannedSummary] = {}
    pending: list[tuple[str, bool]] = []
    for event in events:
        data = event.model_dump()
        kind = data["type"]
        if kind == "agent_contributor_fired":
            pending.append((data["contributor"], data["persist"]))
        elif kind == "agent_turn_started":
            rows[data["turn"]] = {
                "turn": data["turn"],
                "contributors": tuple(pending),
                "estimated_tokens": data["estimated_tokens"],
                "compactions": [],
                "summaries": [],
            }
            pending = []
        elif kind == "agent_summary_taken":
            summaries[data["reduction_id"]] = PlannedSummary(data["reduction_id"], "call")
        elif kind == "agent_summary_fallback":
            summaries[data["reduction_id"]] = PlannedSummary(
                data["reduction_id"], data["reason"], data["detail"]
            )
        elif kind == "agent_compaction":
            row = rows[data["turn"]]
            row["compactions"].append(
                {
                    k: data[k]
                    for k in (
                        "level",
                        "reduction_id",
                        "first_turn",
                        "last_turn",
                        "tokens_before",
                        "tokens_after",
                        "replacement",
                    )
                }
            )
            if data["reduction_id"] in summaries:
                row["summaries"].append(summaries[data["reduction_id"]])
    return [
        PlannedTurn(
            r["turn"],
            r["contributors"],
            r["estimated_tokens"],
            tuple(r["compactions"]),
            tuple(r["summaries"]),
        )
        for r in rows.values()
    ]


def simulate(
    spec: AgentSpec,
    ctx: ContextView,
    scopes: RenderScopes,
    *,
    turns: int | None = None,
    reply_chars: int = 400,
    tool_result_chars: int = 800,
    counter: TokenCounter = default_token_counter,
) -> Plan:
    """Simulate the first `turns` turns (default `max_turns`) of the agent `spec` over `ctx`."""
    limit = spec.max_turns if turns is None else min(turns, spec.max_turns)
    spec = replace(spec, max_turns=limit)
    scope = scopes.scope(ctx)
    goal = spec.goal.render(scope, suggestor=spec.name, cycle=ctx.cycle)
    tools = tuple(TOOL_SPECS[name] for name in spec.tools)
    machine = TurnMachine(
        spec, TurnEnv(scope, ctx, goal, spec.name), tools, counter=counter, cycle=ctx.cycle
    )
    summarizer = (
        None
        if spec.summarizer is None
        else _InstantSummarizer(spec.summarizer.budget.expected_summary_bytes)
    )
    events: list[BaseModel] = []

    async def call_model(request: ModelRequest) -> Message:
        return sized_reply(reply_chars)

    def run_tools(calls: Sequence[ToolCallPart]) -> tuple[tuple[ToolResultPart, ...], bool]:
        return tuple(sized_result(tool_result_chars) for _ in calls), False

    done = asyncio.run(
        drive(
            machine,
            call_model=call_model,
            run_tools=run_tools,
            reducer=Reducer(spec.summarizer, summarizer),
            sink=events.append,
        )
    )
    policy = spec.policy
    return Plan(
        agent=spec.name,
        context_window=policy.window,
        threshold_tokens=policy.threshold * policy.window,
        emergency_tokens=policy.emergency * policy.window,
        turns=tuple(_rows(events)),
        status=done.status,
        detail=done.detail,
        assumptions={
            "reply_chars": reply_chars,
            "tool_result_chars": tool_result_chars,
            "turns": limit,
        },
    )


def plan_pipeline(
    document: LoadedDocument,
    *,
    inputs: Mapping[str, Any],
    agent: str | None = None,
    turns: int | None = None,
    reply_chars: int = 400,
    tool_result_chars: int = 800,
) -> list[Plan]:
    """`simulate` every agent of a validated pipeline (or the one named `agent`).

    The agents see a context holding the pipeline's seed facts, built by the
    compiler as a run builds them. An unknown `agent`, or a pipeline without
    agents, is a `UsageError`.
    """
    specs, seeds, scopes = _agents(document, inputs)
    name = Path(document.file).name
    if agent is not None:
        chosen = [spec for spec in specs if spec.name == agent]
        if not chosen:
            guess = did_you_mean(agent, [spec.name for spec in specs])
            raise UsageError(
                f"no agent named {agent!r} in {name}",
                hint=f"did you mean {guess!r}?"
                if guess
                else f"agents: {', '.join(spec.name for spec in specs) or 'none'}",
            )
        specs = chosen
    if not specs:
        raise UsageError(f"{name} has no agent suggestor to plan")
    return [
        simulate(
            spec,
            seeds,
            scopes,
            turns=turns,
            reply_chars=reply_chars,
            tool_result_chars=tool_result_chars,
        )
        for spec in specs
    ]


def _agents(
    document: LoadedDocument, inputs: Mapping[str, Any]
) -> tuple[list[AgentSpec], Context, RenderScopes]:
    """The agent specs of the pipeline, a context holding its seeds, and the render scopes."""
    settings = compile_settings(document, inputs=inputs)
    ctx = compile_context(settings, models={}, usage=UsageMeter(Budget()))
    specs = [parse_agent(agent, ctx) for agent in parse_agents(document.data)]
    record = PromotionRecord("plan", "plan", 0)
    seeds = Context.from_facts(
        (Fact(s.key, s.id, s.content, s.provenance, s.confidence, record) for s in settings.seeds),
        cycle=1,
    )
    return specs, seeds, ctx.scopes
