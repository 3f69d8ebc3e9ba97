"""The `agent` suggestor: compile it from YAML, run its turn loop in `execute`.

Failures: a model error is hard (an `AgentError` carrying the source span);
`context_exceeded` is hard; tool errors are soft (sent back to the model);
a spent run budget (a refused reservation, or a model refusing a retry for the
run's budget) ends the loop with what was proposed so far. Every model call is
made under a reservation of the run's meter, settled with the model's usage.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from converge_dsl import codes
from converge_dsl.agents._contributors import TurnEnv
from converge_dsl.agents._events import AgentFinished, EventSink
from converge_dsl.agents._kind import AgentSuggestorSpec
from converge_dsl.agents._loop import Reducer, drive
from converge_dsl.agents._machine import Done, TurnMachine
from converge_dsl.agents._policy import TokenCounter, default_token_counter
from converge_dsl.agents._spec import AgentSpec, parse_agent
from converge_dsl.agents._summarizer import ModelSummarizer, SpanSummarizer
from converge_dsl.agents._tools import ToolBox
from converge_dsl.compiler import (
    CompileContext,
    CoreSuggestor,
    SuggestorCore,
    ToolCaller,
    UsageRecorder,
)
from converge_dsl.diagnostics import JsonPath
from converge_dsl.engine.types import AgentEffect, ContextView, ProposedFact, Provenance
from converge_dsl.errors import ConvergeError, RunError
from converge_dsl.frontend import EVERY_TOOL, tool_reference
from converge_dsl.models import metered_call
from converge_dsl.models.port import (
    Message,
    Model,
    ModelError,
    ModelRequest,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
)


class AgentError(RunError):
    """An agent failed hard. `reason` is `context_exceeded` or `model_error`."""

    def __init__(self, reason: str, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class AgentSuggestor(CoreSuggestor):
    """A compiled agent. Its `Reducer` (summary budget) lasts for the run.

    Its per-run state (the summary calls made against `max_calls`) is kept in
    checkpoints: `checkpoint_state()` / `restore_checkpoint_state(data)`.
    """

    core: SuggestorCore
    spec: AgentSpec
    model: Model
    reducer: Reducer
    meter: UsageRecorder | None = None
    sink: EventSink | None = None
    counter: TokenCounter = default_token_counter
    tools: ToolCaller | None = None

    def provenance(self) -> Provenance:
        return Provenance(self.core.source, model_id=self.model.model_id())

    def complexity_hint(self) -> str | None:
        return f"up to {self.spec.max_turns} model calls per execution"

    def checkpoint_state(self) -> dict[str, int]:
        """The agent's per-run state that checkpoints keep: its summary calls so far."""
        return {"summary_calls": self.reducer.calls_made}

    def restore_checkpoint_state(self, data: Any) -> None:
        """Continue a resumed run from `checkpoint_state()` data (summary calls already made)."""
        self.reducer.calls_made = int(data["summary_calls"])

    def _fail(self, reason: str, message: str, cycle: int, hint: str | None = None) -> AgentError:
        return AgentError(
            reason, message, hint=hint, span=self.core.span, suggestor=self.name, cycle=cycle
        )

    async def _call_model(
        self, request: ModelRequest, cycle: int, warnings: list[ProposedFact]
    ) -> Message | None:
        """One model call of the turn loop under a reservation of the run's meter;
        None when the run's budget refuses it (or refuses the model a retry). An
        answer past its token cap adds a warning to `warnings`."""
        try:
            metered = await metered_call(self.model, request, self.meter)
        except ModelError as exc:
            raise self._fail(
                "model_error",
                f"model call failed at turn {request.turn}: {exc.coded_message}",
                cycle,
                exc.hint,
            ) from None
        if metered is None:
            return None
        note = metered.overshoot_note()
        if note is not None:
            warnings.append(
                self.core.warning(
                    codes.TOKEN_CAP_IGNORED,
                    f"budget:overshoot:turn-{request.turn}",
                    cycle,
                    f"turn {request.turn}: {note}",
                    self.provenance(),
                    turn=request.turn,
                    max_tokens=metered.max_tokens,
                    overshoot=metered.overshoot,
                )
            )
        return metered.answer.message

    async def _mcp_tools(self, cycle: int) -> tuple[ToolSpec, ...]:
        """The MCP tools its `tools` name, listed by their servers (started on first use);
        a server that cannot start fails the agent, located at the agent."""
        wanted = [r for name in self.spec.tools if (r := tool_reference(name)) is not None]
        if not wanted:
            return ()
        if self.tools is None:
            raise self._fail("tool_server", "the run has no tool servers", cycle)
        offered: dict[str, ToolSpec] = {}
        for server, tool in wanted:
            try:
                listed = await self.tools.listing(server)
            except ConvergeError as exc:
                raise self._fail("tool_server", exc.cited, cycle, exc.hint) from None
            for found in listed:
                if tool == EVERY_TOOL or found.name.endswith(f"/{tool}"):
                    offered.setdefault(found.name, found)
        return tuple(offered.values())

    async def execute(self, ctx: ContextView) -> AgentEffect:
        spec, cycle = self.spec, ctx.cycle
        scope = self.core.scopes.scope(ctx)
        goal = spec.goal.render(scope, suggestor=self.name, cycle=cycle)
        tools = ToolBox(
            spec.tools,
            ctx,
            spec.target,
            self.provenance(),
            mcp=await self._mcp_tools(cycle),
            caller=self.tools,
            suggestor=self.name,
            cycle=cycle,
        )
        machine = TurnMachine(
            spec,
            TurnEnv(scope, ctx, goal, self.name),
            tools.specs,
            counter=self.counter,
            cycle=cycle,
        )

        warnings: list[ProposedFact] = []

        async def call_model(request: ModelRequest) -> Message | None:
            return await self._call_model(request, cycle, warnings)

        outcomes: list[ToolResultPart] = []

        async def run_tools(calls: Sequence[ToolCallPart]) -> tuple[tuple[Any, ...], bool]:
            results = await tools.execute(calls)
            outcomes.extend(results)
            return results, tools.finished

        done = await drive(
            machine,
            call_model=call_model,
            run_tools=run_tools,
            reducer=self.reducer,
            sink=self.sink,
        )
        if self.sink is not None:
            self.sink(
                AgentFinished(
                    suggestor=self.name,
                    cycle=cycle,
                    status=done.status,
                    turns=done.turns,
                    proposals=len(tools.proposals),
                )
            )
        if done.status == "context_exceeded":
            raise self._fail(
                "context_exceeded",
                f"context_exceeded at turn {done.turns - 1}: {done.detail}",
                cycle,
                self._exceeded_hint(done),
            )
        # An execution the budget stopped is explained by the budget's stop.
        idle = not tools.proposals and done.status != "budget_exhausted"
        if idle and "context.propose" in spec.tools:
            warnings.append(self._idle_warning(done.status, done.turns, outcomes, cycle))
        return AgentEffect.of((*tools.proposals, *warnings))

    def _exceeded_hint(self, done: Done) -> str:
        """What to change. When what stands for the cleared spans (stubs or summaries)
        holds more than any kept turn, the model never finishes: its turn limit. Otherwise
        the largest kept turn is named, with the tool whose result is most of it."""
        if not done.cleared:
            return (
                "raise context_window, lower compaction.threshold, or clear turns sooner "
                "(summarizer.clear_turns_older_than)"
            )
        # The turn that overflowed was started but never sent to the model.
        called = done.turns - 1
        spans = f"{done.cleared} span{'s' if done.cleared != 1 else ''}"
        heavy = done.heaviest
        if heavy is None or done.reduced_tokens >= heavy.tokens:
            return (
                f"the model called tools for {called} turn{'s' if called != 1 else ''} "
                f"without finishing, until what stands for the {spans} it cleared "
                f"({done.reduced_tokens} tokens) filled the window: lower max_turns "
                f"(now {self.spec.max_turns}) or say in the goal when to call finish; or "
                "raise context_window"
            )
        where = f"turn {heavy.turn} holds {heavy.tokens} of the window's {done.window} tokens"
        if heavy.tool is None:
            return f"{where}: shorten what it sends, or raise context_window"
        if heavy.tool.startswith("mcp:"):
            server = heavy.tool[4:].split("/", 1)[0]
            lower = f"lower max_result_bytes of tools.{server}"
        else:
            lower = f"have {heavy.tool} return less"
        return (
            f"{where}, most of it the {heavy.result_chars}-character result of {heavy.tool}: "
            f"{lower}, or raise context_window"
        )

    def _idle_warning(
        self, status: str, turns: int, outcomes: Sequence[ToolResultPart], cycle: int
    ) -> ProposedFact:
        """The warning of an execution that proposed nothing: every tool call failed
        (CD923), or the model never proposed (CD922)."""
        ended = f"ended ({status}) after {turns} turn{'s' if turns != 1 else ''}"
        if outcomes and all(result.is_error for result in outcomes):
            first = outcomes[0].output
            return self.core.warning(
                codes.AGENT_TOOL_ERRORS,
                "agent:tool-errors",
                cycle,
                f"{ended} without proposing anything: all {len(outcomes)} of its tool calls "
                f"failed (first: {first})",
                self.provenance(),
                status=status,
                turns=turns,
                tool_errors=len(outcomes),
                first_error=first,
            )
        called = f"{len(outcomes)} tool call{'s' if len(outcomes) != 1 else ''}"
        return self.core.warning(
            codes.AGENT_NO_PROPOSAL,
            "agent:no-proposal",
            cycle,
            f"{ended} without proposing anything ({called}, none of them a context.propose "
            "that succeeded); set tool_choice (required, or context.propose) or sharpen the goal",
            self.provenance(),
            status=status,
            turns=turns,
            tool_calls=len(outcomes),
        )


def compile_agent(
    suggestor: AgentSuggestorSpec,
    ctx: CompileContext,
    *,
    summarizer: SpanSummarizer | None = None,
    counter: TokenCounter = default_token_counter,
) -> AgentSuggestor:
    """The builder of kind `agent`. `summarizer` overrides the model-backed one (tests)."""
    path = suggestor.path
    spec = parse_agent(suggestor, ctx)
    model = _model(ctx, spec.model, (*path, "model"))
    if summarizer is None and spec.summarizer is not None:
        summarizer = ModelSummarizer(
            _model(ctx, spec.summarizer.model, (*path, "summarizer", "model")),
            spec.summarizer.model,
            spec.summarizer.prompt,
            suggestor=f"{spec.name}/summarizer",
            meter=ctx.usage,
        )
    return AgentSuggestor(
        core=SuggestorCore.of(suggestor, ctx),
        spec=spec,
        model=model,
        reducer=Reducer(spec.summarizer, summarizer, ctx.usage),
        meter=ctx.usage,
        sink=ctx.events,
        counter=counter,
        tools=ctx.tools,
    )


def _model(ctx: CompileContext, name: str, path: JsonPath) -> Model:
    try:
        return ctx.models[name]
    except KeyError:
        from converge_dsl.diagnostics import did_you_mean, suggestion

        guess = did_you_mean(name, ctx.models)
        raise ctx.invalid(
            codes.UNKNOWN_MODEL,
            f"model {name!r} is not declared under `models`",
            path,
            hint=suggestion(guess) if guess else None,
        ) from None
