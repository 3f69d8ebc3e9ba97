"""`plan`: simulate an agent's first turns without calling a model.

The simulation drives the very `TurnMachine`, `Reducer` and contributors the
real agent uses, with a synthetic model (every reply is a tool call of the
assumed size), synthetic tool results, and a summarizer that answers at once
with `expected_summary_bytes` characters. Only sizes are assumed: the
compaction points, the contributor cadence and the summary budget decisions
are the real ones.

An agent (or summarizer) whose model is `scripted` is answered by its model
script instead, on the requests the turn machine builds, so the plan sees the
script's tool calls, `finish` and plain answers (and stops where the run would);
its tool results keep the assumed size (the run's context is not known yet),
but `finish` finishes. Each plan counts the model calls and tokens of one
execution (turns and summary calls, input plus output: the scripted model's own
usage, else the machine's estimate and the assumed reply), and the pipeline's
plan totals them against `budget.max_model_calls` and `budget.max_tokens`.

Assumed sizes are bounded by `MAX_ASSUMED_CHARS`, and each size is built once
(not once per turn): the turn machine measures real text.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from converge_dsl import codes
from converge_dsl._files import ReferenceRefused, referenced_path, user_roots
from converge_dsl._json_types import JsonObject
from converge_dsl.agents._contributors import TurnEnv
from converge_dsl.agents._kind import parse_agents
from converge_dsl.agents._loop import Reducer, drive
from converge_dsl.agents._machine import TurnMachine
from converge_dsl.agents._policy import TokenCounter, default_token_counter, message_text
from converge_dsl.agents._spec import AgentSpec, parse_agent
from converge_dsl.agents._summarizer import ModelSummarizer, SpanSummarizer
from converge_dsl.agents._tools import TOOL_SPECS
from converge_dsl.clock import FakeClock
from converge_dsl.compiler import (
    PipelineSettings,
    RenderScopes,
    compile_context,
    compile_settings,
)
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.engine import Budget, UsageMeter
from converge_dsl.engine.context import Context
from converge_dsl.engine.types import ContextView, Fact, PromotionRecord
from converge_dsl.errors import UsageError
from converge_dsl.frontend import LoadedDocument, ScriptedModelSpec
from converge_dsl.models import ScriptedModel
from converge_dsl.models.port import (
    Message,
    Model,
    ModelDefaults,
    ModelError,
    ModelRequest,
    ModelReturn,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)

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
    """One execution of one agent, simulated.

    `replies` says where the replies came from (`assumed`, or `model script
    FILE`); `model_calls` counts its turns' calls and its summary calls
    (`summary_calls` of them), `tokens` their estimated input plus output.
    """

    agent: str
    context_window: int
    threshold_tokens: float
    emergency_tokens: float
    turns: tuple[PlannedTurn, ...]
    status: str
    detail: str = ""
    assumptions: dict[str, int] = field(default_factory=dict)
    replies: str = "assumed"
    model_calls: int = 0
    summary_calls: int = 0
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class PlanTotal:
    """The plans' model calls and tokens together (one execution of each agent), and the
    pipeline's limits on them (None: no limit)."""

    model_calls: int
    tokens: int
    max_model_calls: int | None
    max_tokens: int | None


@dataclass(frozen=True, slots=True)
class PipelinePlan:
    """What `converge-dsl plan` shows: a plan per agent, and their total."""

    plans: tuple[Plan, ...]
    total: PlanTotal


class _Tally:
    """The model calls and tokens of one simulated execution."""

    def __init__(self) -> None:
        self.calls = self.summary_calls = self.tokens = 0

    def add(self, tokens: int, *, summary: bool = False) -> None:
        self.calls += 1
        self.summary_calls += summary
        self.tokens += tokens


class _Counted(ModelDefaults):
    """A scripted model whose answers the tally counts, with the usage the run would meter."""

    def __init__(self, model: Model, tally: _Tally, *, summary: bool) -> None:
        self._model, self._tally, self._summary = model, tally, summary

    def model_id(self) -> str:
        return self._model.model_id()

    async def call(self, req: ModelRequest) -> ModelReturn:
        answer = await self._model.call(req)
        usage = answer.usage
        self._tally.add(usage.input_tokens + usage.output_tokens, summary=self._summary)
        return answer


class _InstantSummarizer:
    def __init__(self, size: int, tally: _Tally, counter: TokenCounter) -> None:
        self._text = "s" * size
        self._tally, self._counter = tally, counter

    def model_id(self) -> str:
        return "plan:assumed"

    async def summarize(self, span_text: str) -> str:
        self._tally.add(self._counter(span_text) + self._counter(self._text), summary=True)
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
    models: Mapping[str, ScriptedModel] | None = None,
) -> Plan:
    """Simulate the first `turns` turns (default `max_turns`) of the agent `spec` over `ctx`.

    `models` are the pipeline's scripted models by name: an agent or summarizer
    whose model is among them is answered by its script, the others by the
    assumed sizes.
    """
    limit = spec.max_turns if turns is None else min(turns, spec.max_turns)
    spec = replace(spec, max_turns=limit)
    scope = scopes.scope(ctx)
    goal = spec.goal.render(scope, suggestor=spec.name, cycle=ctx.cycle)
    # An MCP tool is offered by its name alone: plan starts no server.
    tools = tuple(
        TOOL_SPECS.get(name) or ToolSpec(name, "", {"type": "object"}) for name in spec.tools
    )
    machine = TurnMachine(
        spec, TurnEnv(scope, ctx, goal, spec.name), tools, counter=counter, cycle=ctx.cycle
    )
    tally, scripted = _Tally(), models or {}
    model = scripted.get(spec.model)
    events: list[BaseModel] = []
    call_model = _turn_model(model, tally, reply_chars, counter, machine.estimate)

    async def run_tools(calls: Sequence[ToolCallPart]) -> tuple[tuple[ToolResultPart, ...], bool]:
        sized = sized_result(tool_result_chars)
        finished = any(call.name == "finish" and call.name in spec.tools for call in calls)
        return tuple(ToolResultPart(call.id, sized.output) for call in calls), finished

    reducer = Reducer(spec.summarizer, _summarizer(spec, scripted, tally, counter))
    try:
        done = asyncio.run(
            drive(
                machine,
                call_model=call_model,
                run_tools=run_tools,
                reducer=reducer,
                sink=events.append,
            )
        )
        status: str = done.status
        detail = done.detail
    except ModelError as exc:  # the script has no answer for a request: the run fails there
        status, detail = "model_error", exc.coded_message
    policy = spec.policy
    return Plan(
        agent=spec.name,
        context_window=policy.window,
        threshold_tokens=policy.threshold * policy.window,
        emergency_tokens=policy.emergency * policy.window,
        turns=tuple(_rows(events)),
        status=status,
        detail=detail,
        assumptions={
            "reply_chars": reply_chars,
            "tool_result_chars": tool_result_chars,
            "turns": limit,
        },
        replies="assumed" if model is None else f"model script {model.script_file}",
        model_calls=tally.calls,
        summary_calls=tally.summary_calls,
        tokens=tally.tokens,
    )


def _turn_model(
    model: ScriptedModel | None,
    tally: _Tally,
    reply_chars: int,
    counter: TokenCounter,
    estimate: Callable[[], int],
) -> Callable[[ModelRequest], Awaitable[Message]]:
    """The model step of the simulation: the script's answer, else the assumed reply
    (counted as `estimate()`, the machine's measure of the request, plus the reply)."""
    if model is not None:
        counted = _Counted(model, tally, summary=False)

        async def scripted(request: ModelRequest) -> Message:
            return (await counted.call(request)).message

        return scripted

    async def assumed(request: ModelRequest) -> Message:
        reply = sized_reply(reply_chars)
        tally.add(
            estimate() + counter(message_text(reply))
        )  # the request as the machine measures it
        return reply

    return assumed


def _summarizer(
    spec: AgentSpec, scripted: Mapping[str, ScriptedModel], tally: _Tally, counter: TokenCounter
) -> SpanSummarizer | None:
    summary = spec.summarizer
    if summary is None:
        return None
    model = scripted.get(summary.model)
    if model is None:
        return _InstantSummarizer(summary.budget.expected_summary_bytes, tally, counter)
    return ModelSummarizer(
        _Counted(model, tally, summary=True),
        summary.model,
        summary.prompt,
        suggestor=f"{spec.name}/summarizer",
    )


def plan_pipeline(
    document: LoadedDocument,
    *,
    inputs: JsonObject,
    agent: str | None = None,
    turns: int | None = None,
    reply_chars: int = 400,
    tool_result_chars: int = 800,
    roots: Sequence[Path] | None = None,
    env: Mapping[str, str] | None = None,
) -> PipelinePlan:
    """`simulate` every agent of a validated pipeline (or the one named `agent`), and total them.

    The agents see a context holding the pipeline's seed facts, built by the
    compiler as a run builds them; an agent on a scripted model is answered by
    its script, found inside the pipeline's folder or one of `roots` (default:
    those of `CONVERGE_DSL_ALLOW_ROOTS` in `env`) and read under `env`'s file-size
    cap (default: the process's environment). An
    unknown `agent`, or a pipeline without agents, is a `UsageError`.
    """
    settings, specs, seeds, scopes = _agents(document, inputs)
    name = Path(document.file).name
    if agent is not None:
        chosen = [spec for spec in specs if spec.name == agent]
        if not chosen:
            guess = did_you_mean(agent, [spec.name for spec in specs])
            raise UsageError(
                f"no agent named {agent!r} in {name}",
                hint=suggestion(guess)
                if guess
                else f"agents: {', '.join(spec.name for spec in specs) or 'none'}",
                code=codes.ARGUMENTS_REFUSED,
            )
        specs = chosen
    if not specs:
        raise UsageError(f"{name} has no agent suggestor to plan", code=codes.ARGUMENTS_REFUSED)
    scripted = _scripted_models(
        settings, specs, user_roots((), env) if roots is None else roots, env
    )
    plans = tuple(
        simulate(
            spec,
            seeds,
            scopes,
            turns=turns,
            reply_chars=reply_chars,
            tool_result_chars=tool_result_chars,
            models=scripted,
        )
        for spec in specs
    )
    budget = settings.budget
    total = PlanTotal(
        model_calls=sum(p.model_calls for p in plans),
        tokens=sum(p.tokens for p in plans),
        max_model_calls=budget.max_model_calls,
        max_tokens=budget.max_tokens,
    )
    return PipelinePlan(plans, total)


def _scripted_models(
    settings: PipelineSettings,
    specs: Sequence[AgentSpec],
    roots: Sequence[Path],
    env: Mapping[str, str] | None,
) -> dict[str, ScriptedModel]:
    """The scripted models the agents (and their summarizers) use, loaded from their scripts.

    A script is found as `validate` and `run` find it (inside the pipeline's
    folder or a root the user allows); a model with `record:` is only read.
    """
    wanted = {spec.model for spec in specs}
    wanted |= {spec.summarizer.model for spec in specs if spec.summarizer is not None}
    models: dict[str, ScriptedModel] = {}
    for name in sorted(wanted):
        declared = settings.models.get(name)
        if declared is None or not isinstance(declared.spec, ScriptedModelSpec):
            continue
        script = declared.spec.script
        try:
            path = referenced_path(script, declared.base_dir, roots, field="script file")
        except ReferenceRefused as exc:
            raise UsageError(exc.message, hint=exc.hint, code=exc.code) from None
        # A fake clock: a scripted `delay_s` costs the plan no time.
        models[name] = ScriptedModel.from_file(
            path, name=name, clock=FakeClock(), display=script, env=env
        )
    return models


def _agents(
    document: LoadedDocument, inputs: JsonObject
) -> tuple[PipelineSettings, list[AgentSpec], Context, RenderScopes]:
    """The settings, the agent specs of the pipeline, a context holding its seeds, and the
    render scopes."""
    settings = compile_settings(document, inputs=inputs)
    ctx = compile_context(settings, models={}, usage=UsageMeter(Budget()))
    specs = [parse_agent(agent, ctx) for agent in parse_agents(document.data)]
    record = PromotionRecord("plan", "plan", 0)
    seeds = Context.from_facts(
        (Fact(s.key, s.id, s.content, s.provenance, s.confidence, record) for s in settings.seeds),
        cycle=1,
    )
    return settings, specs, seeds, ctx.scopes
