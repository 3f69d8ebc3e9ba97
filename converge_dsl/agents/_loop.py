"""The thin async driver of the turn machine, and the reducer that fills compactions.

`drive` performs each step `TurnMachine.next_step()` asks for, through
injected callables (model, tools, reducer), so the real agent and `plan`
(synthetic model and tools) share the machine and the reducer unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence

from pydantic import BaseModel

from converge_dsl.agents._events import EventSink, SummaryFallback, SummaryTaken
from converge_dsl.agents._machine import CallModel, CallTools, Compact, Done, TurnMachine
from converge_dsl.agents._policy import stub_text, summary_text
from converge_dsl.agents._spec import SummarizerSpec
from converge_dsl.agents._summarizer import SpanSummarizer, side_call
from converge_dsl.agents._summary_budget import SummaryBudget
from converge_dsl.compiler import UsageRecorder
from converge_dsl.models.port import Message, ModelRequest, ToolCallPart, ToolResultPart

# The model step: a reply, or None when the run's model budget forbids the call.
ModelStep = Callable[[ModelRequest], Awaitable[Message | None]]
# The tool step: results in call order, and whether `finish` was called.
ToolStep = Callable[[Sequence[ToolCallPart]], Awaitable[tuple[tuple[ToolResultPart, ...], bool]]]


class Reducer:
    """Turns a pending compaction into a stub or a summary, within the summary budget.

    One reducer lives as long as its agent suggestor (a run), so `max_calls`
    counts every summary call of the run. Without a summarizer: always the stub.
    """

    def __init__(
        self,
        spec: SummarizerSpec | None,
        summarizer: SpanSummarizer | None,
        meter: UsageRecorder | None = None,
    ) -> None:
        self.spec = spec
        self.summarizer = summarizer
        self.meter = meter
        self.calls_made = 0

    async def resolve(
        self, compact: Compact, emit: Callable[[BaseModel], None], suggestor: str, cycle: int
    ) -> tuple[str, bool]:
        """The replacement text, and whether it is a summary."""
        step = compact.step
        stub = stub_text(step.first_turn, step.last_turn)
        if self.spec is None or self.summarizer is None:
            return stub, False
        span = compact.span_text

        def fallback(reason: str, detail: str) -> tuple[str, bool]:
            emit(
                SummaryFallback(
                    suggestor=suggestor,
                    cycle=cycle,
                    reduction_id=compact.reduction_id,
                    reason=reason,
                    detail=detail,
                )
            )
            return stub, False

        budget = self.spec.budget
        refusal = budget.refusal(self.calls_made, len(span))
        if refusal is not None:
            return fallback(refusal, _refusal_detail(refusal, self.calls_made, len(span), budget))
        if self.meter is not None and not self.meter.can_call():
            return fallback("run_budget_exhausted", "the run's model budget is spent")
        self.calls_made += 1
        result = await side_call(self.summarizer, span, budget.timeout_s)
        if result.text is None:
            return fallback(result.reason or "error", result.detail)
        text = summary_text(step.first_turn, step.last_turn, result.text)
        if len(text) >= len(span):
            return fallback(
                "not_shorter", f"summary of {len(text)} chars for a span of {len(span)}"
            )
        emit(
            SummaryTaken(
                suggestor=suggestor,
                cycle=cycle,
                reduction_id=compact.reduction_id,
                model_id=self.summarizer.model_id(),
                prompt_version=self.spec.prompt_version,
                sha256=hashlib.sha256(result.text.encode()).hexdigest(),
                chars=len(result.text),
            )
        )
        return text, True


def _refusal_detail(reason: str, calls: int, chars: int, budget: SummaryBudget) -> str:
    if reason == "budget_exhausted":
        return f"{calls} of max_calls {budget.max_calls} used"
    if reason == "over_budget":
        return f"span of {chars} chars > max_input_chars {budget.max_input_chars}"
    return (
        f"span of {chars} chars < expected_summary_bytes {budget.expected_summary_bytes} x "
        f"cost_floor_multiple {budget.multiple_text} = {budget.floor_text}"
    )


async def drive(
    machine: TurnMachine,
    *,
    call_model: ModelStep,
    run_tools: ToolStep,
    reducer: Reducer,
    sink: EventSink | None,
) -> Done:
    """Run `machine` to its end, emitting its events into `sink` as they happen."""

    def emit(event: BaseModel) -> None:
        if sink is not None:
            sink(event)

    def flush() -> None:
        for event in machine.events:
            emit(event)
        machine.events.clear()

    while True:
        step = machine.next_step()
        flush()
        if isinstance(step, Done):
            return step
        if isinstance(step, Compact):
            text, summarised = await reducer.resolve(step, emit, machine.spec.name, machine.cycle)
            machine.feed_reduction(text, "summary" if summarised else "stub")
        elif isinstance(step, CallModel):
            reply = await call_model(step.request)
            if reply is None:
                machine.stop("budget_exhausted", "the run's model budget is spent")
            else:
                machine.feed_reply(reply)
        elif isinstance(step, CallTools):
            results, finished = await run_tools(step.calls)
            machine.feed_tool_results(results, finished=finished)
