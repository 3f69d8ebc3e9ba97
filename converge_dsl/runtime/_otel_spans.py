"""Run events -> OpenTelemetry spans: one per run, cycle, suggestor execution, agent turn,
model call and MCP tool call, parented run > cycle > suggestor > (turn >) model or tool call.

`SpanRecorder` is an event listener (`TraceWriter` calls it with every event
of the run, the same events the JSONL trace is written from, documented in
`schemas/trace-event.v1.json`); the engine knows nothing of it. Start and end
times are the events' own monotonic readings (`timing.at`, and `at -
duration_s` for an execution that ended), moved to the epoch by one offset
read when the recorder is made; events without timing (the agent's) are
stamped with the run's clock when they arrive, which is when they happen.

A suggestor's span stays open until its cycle ends, so that it can count the
facts its proposals became (promotion happens after every execution of the
cycle); it ends at its execution's own end time. Spans still open when the run
finishes (a stop mid-cycle) end with the run.

Model-call and tool-call spans follow the GenAI semantic conventions
(`_otel_genai`: `chat`, `execute_tool`); the others carry `converge_dsl.*`
attributes. No prompt, answer, tool argument or result, fact text or error
message (it may quote an answer) is recorded unless `content` is on; then they
are, each string first through `redact` (the run's models' secret masks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from pydantic import BaseModel

from converge_dsl.frontend import SuggestorKind
from converge_dsl.models.port import ModelRequest, ModelReturn

from . import _otel_genai as genai
from ._otel_genai import Attributes, ModelFacts

_ERROR_CODE = re.compile(r"\bE_[A-Z_]+\b")
# The engine's stop reasons that are failures of the run (others end it as asked).
_FAILED_STOPS = frozenset({"error", "invariant_violated", "cancelled"})


class _Execution:
    """A suggestor's span, open until its cycle ends, with what its cycle did with it."""

    __slots__ = ("end", "pending", "promoted", "rejected", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.end: int | None = None
        self.promoted = 0
        self.rejected = 0
        self.pending = 0


class SpanRecorder:
    """Listens to a run's events and records its spans with `tracer`.

    `now()` is the run's monotonic clock (for events that carry no timing);
    `epoch_offset` turns its readings into epoch seconds.
    """

    def __init__(
        self,
        tracer: Tracer,
        now: Callable[[], float],
        epoch_offset: float,
        *,
        content: bool = False,
        redact: Callable[[str], str] = lambda text: text,
    ) -> None:
        self._tracer = tracer
        self._now = now
        self._offset_ns = round(epoch_offset * 1e9)
        self.content = content
        self._redact = redact
        self._pipeline = ""
        self._kinds: Mapping[str, SuggestorKind] = {}
        self._models: Mapping[str, ModelFacts] = {}
        self._run: Span | None = None
        self._cycle = 0
        self._cycles: dict[int, Span] = {}
        self._executions: dict[tuple[int, str], _Execution] = {}
        self._turns: dict[tuple[int, str], tuple[int, Span]] = {}
        self._calls: dict[int, Span] = {}
        self.failure: str | None = None

    @property
    def tracer(self) -> Tracer:
        """The tracer its spans are made with (also an evaluation's, `_otel_calls`)."""
        return self._tracer

    def describe(
        self,
        pipeline: str,
        kinds: Mapping[str, SuggestorKind],
        models: Mapping[str, ModelFacts],
        redact: Callable[[str], str] | None = None,
    ) -> None:
        """The pipeline's name, each suggestor's kind, each model's facts (once compiled),
        and the mask every recorded content string passes through."""
        self._pipeline = pipeline
        self._kinds = dict(kinds)
        self._models = dict(models)
        if redact is not None:
            self._redact = redact

    # -- the listener ------------------------------------------------------------------

    def __call__(self, event: BaseModel) -> None:
        handler = getattr(self, f"_on_{getattr(event, 'type', '')}", None)
        if handler is None or self.failure is not None:
            return
        try:
            handler(event, self._ns(event))
        except Exception as exc:  # telemetry never fails the run: it stops recording
            self.failure = f"{type(exc).__name__}: {exc}"[:300]

    def _ns(self, event: BaseModel) -> int:
        timing = getattr(event, "timing", None)
        at = timing.at if timing is not None else self._now()
        return self.epoch_ns(at)

    def epoch_ns(self, at: float) -> int:
        return self._offset_ns + round(at * 1e9)  # apart: a duration keeps its nanoseconds

    def _start(
        self,
        name: str,
        parent: Span | None,
        at: int,
        attributes: Attributes,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        context = None if parent is None else trace.set_span_in_context(parent)
        return self._tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=at
        )

    # -- run and cycles ----------------------------------------------------------------

    def _on_run_started(self, event: Any, at: int) -> None:
        attributes: Attributes = {
            "converge_dsl.pipeline.name": self._pipeline,
            "converge_dsl.run.suggestors": event.suggestors,
            "converge_dsl.run.seeds": event.seeds,
        }
        if event.resumed_from_cycle is not None:
            attributes["converge_dsl.run.resumed_from_cycle"] = event.resumed_from_cycle
        for limit, value in (event.budget or {}).items():
            if value is not None:
                attributes[f"converge_dsl.budget.{limit}"] = value
        self._run = self._start(f"run {self._pipeline}".rstrip(), None, at, attributes)

    def _on_cycle_started(self, event: Any, at: int) -> None:
        self._cycle = event.cycle
        self._cycles[event.cycle] = self._start(
            f"cycle {event.cycle}",
            self._run,
            at,
            {
                "converge_dsl.cycle.number": event.cycle,
                "converge_dsl.cycle.dirty_keys": list(event.dirty_keys),
                "converge_dsl.cycle.candidates": list(event.candidates),
            },
        )

    def _on_cycle_finished(self, event: Any, at: int) -> None:
        span = self._cycles.pop(event.cycle, None)
        self._end_executions(event.cycle, at)
        if span is None:
            return
        attributes: Attributes = {
            "converge_dsl.cycle.promoted": event.promoted,
            "converge_dsl.cycle.dirty_keys_after": list(event.dirty_keys),
        }
        for field in ("facts", "model_calls", "input_tokens", "output_tokens"):
            value = getattr(event, field)
            if value is not None:
                attributes[f"converge_dsl.run.{field}"] = value
        span.set_attributes(attributes)
        span.end(end_time=at)

    def _on_invariant_checked(self, event: Any, at: int) -> None:
        span = self._cycles.get(event.cycle) or self._run
        if span is not None:
            span.add_event(
                "invariant_checked",
                {
                    "converge_dsl.invariant.name": event.invariant,
                    "converge_dsl.invariant.class": event.invariant_class,
                    "converge_dsl.invariant.critical": event.critical,
                    "converge_dsl.invariant.holds": event.holds,
                },
                timestamp=at,
            )

    def _on_hitl_paused(self, event: Any, at: int) -> None:
        if self._run is not None:
            self._run.set_attribute("converge_dsl.run.pending", len(event.pending))

    def _on_run_finished(self, event: Any, at: int) -> None:
        self.finish(at)
        run, self._run = self._run, None
        if run is None:
            return
        run.set_attributes(
            {
                "converge_dsl.run.cycles": event.cycles,
                "converge_dsl.run.stop_reason": event.stop_reason,
                "converge_dsl.run.facts": event.facts,
            }
        )
        if event.stop_reason in _FAILED_STOPS:
            run.set_attribute("error.type", event.stop_reason)
            run.set_status(Status(StatusCode.ERROR, self._message(event.error)))
        run.end(end_time=at)

    def finish(self, at: int | None = None) -> None:
        """End every span still open (the run stopped mid-cycle, or never finished)."""
        end = self.epoch_ns(self._now()) if at is None else at
        for call in list(self._calls):
            span = self._calls.pop(call)
            span.set_attribute("error.type", "cancelled")
            span.set_status(Status(StatusCode.ERROR))
            span.end(end_time=end)
        for cycle in sorted(self._cycles):
            self._end_executions(cycle, end)
            self._cycles.pop(cycle).end(end_time=end)
        for cycle in sorted({cycle for cycle, _ in self._executions}):
            self._end_executions(cycle, end)
        if at is None and self._run is not None:  # no run_finished: the run failed
            run, self._run = self._run, None
            run.set_attribute("error.type", "error")
            run.set_status(Status(StatusCode.ERROR, "the run did not finish"))
            run.end(end_time=end)

    # -- suggestor executions ----------------------------------------------------------

    def _on_suggestor_started(self, event: Any, at: int) -> None:
        name, kind = event.suggestor, self._kinds.get(event.suggestor)
        attributes: Attributes = {
            "converge_dsl.suggestor.name": name,
            "converge_dsl.suggestor.kind": "" if kind is None else kind.telemetry,
            "converge_dsl.cycle.number": event.cycle,
        }
        span_name = f"suggestor {name}"
        operation = None if kind is None else kind.operation
        if operation is not None:  # a GenAI conventions' operation (an agent's invoke_agent)
            span_name = f"{operation} {name}"
            attributes |= {"gen_ai.operation.name": operation, "gen_ai.agent.name": name}
        parent = self._cycles.get(event.cycle) or self._run
        self._executions[(event.cycle, name)] = _Execution(
            self._start(span_name, parent, at, attributes)
        )

    def _on_suggestor_finished(self, event: Any, at: int) -> None:
        execution = self._executions.get((event.cycle, event.suggestor))
        if execution is None:
            return
        execution.end = at
        self._end_turn(event.cycle, event.suggestor, at)
        span = execution.span
        if event.type == "suggestor_finished":
            span.set_attribute("converge_dsl.suggestor.proposals", event.proposals)
            return
        match = _ERROR_CODE.search(event.error)
        span.set_attribute("error.type", match.group(0) if match else "suggestor_failed")
        span.set_status(Status(StatusCode.ERROR, self._message(event.error)))

    def _count(self, event: Any, field: str) -> None:
        execution = self._executions.get((event.cycle, event.suggestor or ""))
        if execution is not None:
            setattr(execution, field, getattr(execution, field) + 1)

    def _on_fact_promoted(self, event: Any, at: int) -> None:
        self._count(event, "promoted")

    def _on_proposal_rejected(self, event: Any, at: int) -> None:
        self._count(event, "rejected")

    def _on_proposal_pending(self, event: Any, at: int) -> None:
        self._count(event, "pending")

    def _end_executions(self, cycle: int, at: int) -> None:
        for key in [key for key in self._executions if key[0] == cycle]:
            execution = self._executions.pop(key)
            self._end_turn(cycle, key[1], at)
            execution.span.set_attributes(
                {
                    "converge_dsl.suggestor.facts_promoted": execution.promoted,
                    "converge_dsl.suggestor.proposals_rejected": execution.rejected,
                    "converge_dsl.suggestor.proposals_pending": execution.pending,
                }
            )
            execution.span.end(end_time=execution.end if execution.end is not None else at)

    # -- agent turns -------------------------------------------------------------------

    def _on_agent_turn_started(self, event: Any, at: int) -> None:
        key = (event.cycle, event.suggestor)
        self._end_turn(*key, at)
        execution = self._executions.get(key)
        span = self._start(
            f"turn {event.turn}",
            None if execution is None else execution.span,
            at,
            {
                "converge_dsl.agent.turn": event.turn,
                "converge_dsl.agent.estimated_tokens": event.estimated_tokens,
                "converge_dsl.agent.context_window": event.context_window,
            },
        )
        self._turns[key] = (event.turn, span)

    def _end_turn(self, cycle: int, suggestor: str, at: int) -> None:
        open_turn = self._turns.pop((cycle, suggestor), None)
        if open_turn is not None:
            open_turn[1].end(end_time=at)

    def _agent_event(self, event: Any, at: int) -> None:
        key = (event.cycle, event.suggestor)
        turn = self._turns.get(key)
        if turn is not None and getattr(event, "turn", turn[0]) != turn[0]:
            turn = None  # a contributor of the next turn fires before that turn starts
        execution = self._executions.get(key)
        span = turn[1] if turn is not None else (None if execution is None else execution.span)
        if span is None:
            return
        # Only counts and names: a contributor's text or a cleared span is content.
        fields = {
            name: value
            for name, value in event.model_dump(exclude={"type", "suggestor", "cycle"}).items()
            if name not in ("text", "detail", "turns") and isinstance(value, str | int | bool)
        }
        if event.type == "agent_tool_called":
            fields = {"gen_ai.tool.name": event.tool, "is_error": event.is_error}
        span.add_event(
            event.type,
            {f"converge_dsl.{k}" if "." not in k else k: v for k, v in fields.items()},
            timestamp=at,
        )

    def _on_agent_finished(self, event: Any, at: int) -> None:
        key = (event.cycle, event.suggestor)
        self._end_turn(*key, at)
        execution = self._executions.get(key)
        if execution is not None:
            execution.span.set_attributes(
                {"converge_dsl.agent.status": event.status, "converge_dsl.agent.turns": event.turns}
            )

    # -- model calls -------------------------------------------------------------------

    def _call_parent(self, suggestor: str | None, turn: int | None) -> Span | None:
        key = (self._cycle, suggestor or "")
        open_turn = self._turns.get(key)
        if open_turn is not None and (turn is None or open_turn[0] == turn):
            return open_turn[1]
        execution = self._executions.get(key)
        if execution is not None:
            return execution.span
        return self._cycles.get(self._cycle) or self._run

    def _on_model_call_started(self, event: Any, at: int) -> None:
        facts = self._models.get(event.model) or ModelFacts(event.model, event.model, "")
        parent = self._call_parent(event.suggestor, event.turn)
        self._calls[event.call] = self._start(
            facts.span_name, parent, at, genai.call_started(facts, event), SpanKind.CLIENT
        )

    def _on_model_call_attempt(self, event: Any, at: int) -> None:
        span = self._calls.get(event.call)
        if span is not None:
            span.add_event("model_call_attempt", genai.call_attempt(event), timestamp=at)

    def _on_model_call_finished(self, event: Any, at: int) -> None:
        span = self._calls.pop(event.call, None)
        if span is None:
            return
        span.set_attributes(genai.call_finished(self._models.get(event.model), event))
        if event.status != "ok":
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=at)

    def exchange(self, call: int, request: ModelRequest, answer: ModelReturn | None) -> None:
        """With `content`: the request (and the answer, when it came) of model call `call`,
        recorded on its span (still open: this is heard before `model_call_finished`)."""
        span = self._calls.get(call)
        if self.content and span is not None:
            span.set_attributes(genai.content(request, answer, self._redact))

    # -- MCP tool calls ----------------------------------------------------------------

    def _on_mcp_tool_called(self, event: Any, at: int) -> None:
        """One span per tool call, under the caller's turn (an agent's) or execution,
        from the call's start to its end (its event comes when it ends)."""
        timing = event.timing
        start = (
            at
            if timing is None or timing.duration_s is None
            else at - round(timing.duration_s * 1e9)
        )
        parent = self._call_parent(event.suggestor, None)
        span = self._start(
            f"execute_tool {genai.tool_name(event)}", parent, start, genai.tool_call(event)
        )
        if self.content:
            span.set_attributes(genai.tool_content(event, self._redact))
        if event.is_error:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=at)

    _on_suggestor_failed = _on_suggestor_finished
    _on_agent_contributor_fired = _agent_event
    _on_agent_tool_called = _agent_event
    _on_agent_compaction = _agent_event
    _on_agent_summary_taken = _agent_event
    _on_agent_summary_fallback = _agent_event

    # -- content -----------------------------------------------------------------------

    def _message(self, text: str | None) -> str | None:
        """An error message for a span status: only with `content` (it may quote an answer)."""
        if not self.content or not text:
            return None
        return self._redact(text)
