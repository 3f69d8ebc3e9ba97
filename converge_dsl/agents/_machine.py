"""The turn loop as a sans-I/O state machine.

`TurnMachine.next_step()` says what to do next: `CallModel`, `CallTools`,
`Compact` (clear a span: the driver answers with a stub or a summary), or
`Done`. The driver performs the step and feeds the outcome back. Nothing here
awaits, sleeps or calls a model, so `plan` can drive the same machine with
synthetic replies and reach the same decisions as a real run.

Per turn: contributors are asked in registration order (persisted messages
join the turn, transient ones ride along with this request only); the
estimate, transient messages included, decides compaction (see `_policy`);
then the model is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from converge_dsl.agents._contributors import Contributor, TurnEnv
from converge_dsl.agents._events import (
    AgentTurnStarted,
    ClearedTurn,
    Compaction,
    ContributorFired,
    SpanCleared,
    ToolCalled,
    messages_to_json,
)
from converge_dsl.agents._policy import (
    CompactionStep,
    Exceeded,
    Segment,
    TokenCounter,
    apply_reduction,
    message_text,
    next_compaction,
    total_tokens,
)
from converge_dsl.agents._spec import AgentSpec
from converge_dsl.engine.types import canonical_json
from converge_dsl.models.port import Message, ModelRequest, ToolCallPart, ToolResultPart, ToolSpec

Status = Literal["completed", "finished", "max_turns", "context_exceeded", "budget_exhausted"]


@dataclass(frozen=True, slots=True)
class CallModel:
    request: ModelRequest


@dataclass(frozen=True, slots=True)
class CallTools:
    calls: tuple[ToolCallPart, ...]


@dataclass(frozen=True, slots=True)
class Compact:
    """Clear a span: `turns` holds each cleared turn's number and messages."""

    step: CompactionStep
    reduction_id: str
    turns: tuple[tuple[int, tuple[Message, ...]], ...]

    @property
    def span_text(self) -> str:
        return "\n".join(message_text(m) for _, messages in self.turns for m in messages)


@dataclass(frozen=True, slots=True)
class Heaviest:
    """The kept turn that holds the most tokens, and the tool whose result is the
    largest part of it (None when the turn has no tool result)."""

    turn: int
    tokens: int
    tool: str | None = None
    result_chars: int = 0


@dataclass(frozen=True, slots=True)
class Done:
    """How the loop ended, after how many turns (counting a turn started but not sent).

    `cleared`: the spans of turns it had cleared by then; `reduced_tokens`: what their
    stubs or summaries still hold of `window` (a history full of them is a model that
    never finished); `heaviest`: the largest kept turn, set when the context overflowed.
    """

    status: Status
    turns: int
    detail: str = ""
    cleared: int = 0
    reduced_tokens: int = 0
    window: int = 0
    heaviest: Heaviest | None = None


Step = CallModel | CallTools | Compact | Done


def system_text(spec: AgentSpec) -> str:
    return (
        f"You are the agent {spec.name!r}. Work toward the goal using the tools; propose "
        f"results for the key {spec.target!r} with context.propose. Answer without a tool "
        "call (or call finish) when you are done."
    )


class TurnMachine:
    """One execution of an agent's turn loop, without I/O."""

    def __init__(
        self,
        spec: AgentSpec,
        env: TurnEnv,
        tools: Sequence[ToolSpec],
        *,
        counter: TokenCounter,
        cycle: int = 0,
    ) -> None:
        self.spec = spec
        self.env = env
        self.cycle = cycle
        self._count = counter
        self._tools = tuple(tools)
        self._system = system_text(spec)
        self._contributors = [Contributor(c) for c in spec.contributors]
        goal = Message.text("user", env.goal)
        tool_text = canonical_json(
            [
                {"name": t.name, "description": t.description, "schema": dict(t.input_schema)}
                for t in self._tools
            ]
        )
        preamble_tokens = counter(self._system) + counter(tool_text) + counter(message_text(goal))
        self._segments: tuple[Segment, ...] = (Segment("preamble", -1, -1, preamble_tokens),)
        self._preamble = (goal,)
        self._turns: list[list[Message]] = []
        self._reductions: dict[tuple[int, int], Message] = {}
        self._transient: tuple[Message, ...] = ()
        self._transient_cost = 0
        self._pending: Compact | None = None
        self._calls: tuple[ToolCallPart, ...] = ()
        self._done: Done | None = None
        self._state: Literal["top", "check", "compacting", "model", "tools"] = "top"
        self.turn = 0
        self.events: list[BaseModel] = []

    # -- what the driver reads -------------------------------------------------
    def conversation(self) -> tuple[Message, ...]:
        out: list[Message] = list(self._preamble)
        for seg in self._segments:
            if seg.kind == "reduction":
                out.append(self._reductions[(seg.first_turn, seg.last_turn)])
            elif seg.kind == "turn":
                out.extend(self._turns[seg.first_turn])
        return tuple(out)

    def estimate(self) -> int:
        return total_tokens(self._segments, self._transient_tokens())

    def _transient_tokens(self) -> int:
        return self._transient_cost

    def _event(self, event: BaseModel) -> None:
        self.events.append(event)

    def _finish(self, status: Status, detail: str = "") -> Done:
        self._done = Done(
            status,
            len(self._turns),
            detail,
            len(self._reductions),
            sum(seg.tokens for seg in self._segments if seg.kind == "reduction"),
            self.spec.policy.window,
            self._heaviest() if status == "context_exceeded" else None,
        )
        return self._done

    def _heaviest(self) -> Heaviest | None:
        kept = [seg for seg in self._segments if seg.kind == "turn" and seg.tokens]
        if not kept:
            return None
        seg = max(kept, key=lambda s: s.tokens)
        messages = self._turns[seg.first_turn]
        names = {c.id: c.name for m in messages for c in m.tool_calls}
        results = [part for m in messages for part in m.parts if isinstance(part, ToolResultPart)]
        if not results:
            return Heaviest(seg.first_turn, seg.tokens)
        big = max(results, key=lambda part: len(part.output))
        return Heaviest(seg.first_turn, seg.tokens, names.get(big.call_id), len(big.output))

    def _append(self, message: Message) -> None:
        self._turns[self.turn].append(message)
        self._segments = (
            *self._segments[:-1],
            self._segments[-1].grow(self._count(message_text(message))),
        )

    # -- the state machine -----------------------------------------------------
    def next_step(self) -> Step:
        if self._done is not None:
            return self._done
        if self._state == "top":
            if self.turn >= self.spec.max_turns:
                return self._finish("max_turns", f"stopped after {self.turn} turns")
            self._start_turn()
        if self._state == "check":
            return self._check()
        if self._state == "compacting" and self._pending is not None:
            return self._pending
        if self._state == "tools":
            return CallTools(self._calls)
        raise RuntimeError(f"next_step() called while waiting for {self._state}")

    def _start_turn(self) -> None:
        self._turns.append([])
        self._segments = (*self._segments, Segment("turn", self.turn, self.turn, 0))
        conversation = self.conversation()
        transient: list[Message] = []
        for contributor in self._contributors:
            message = contributor.contribute(self.turn, conversation, self.env)
            if message is None:
                continue
            spec = contributor.spec
            self._event(
                ContributorFired(
                    suggestor=self.spec.name,
                    cycle=self.cycle,
                    turn=self.turn,
                    contributor=spec.name,
                    kind=spec.kind,
                    role=spec.role,
                    persist=spec.persist,
                    chars=len(message_text(message)),
                    text=message_text(message)[:400],
                )
            )
            if spec.persist:
                self._append(message)
            else:
                transient.append(message)
        self._transient = tuple(transient)
        self._transient_cost = sum(self._count(message_text(m)) for m in self._transient)
        self._event(
            AgentTurnStarted(
                suggestor=self.spec.name,
                cycle=self.cycle,
                turn=self.turn,
                estimated_tokens=self.estimate(),
                context_window=self.spec.policy.window,
            )
        )
        self._state = "check"

    def _check(self) -> Step:
        decision = next_compaction(
            self.spec.policy, self._segments, self._transient_tokens(), self.turn
        )
        if isinstance(decision, Exceeded):
            return self._finish("context_exceeded", decision.reason)
        if decision is None:
            self._state = "model"
            return CallModel(self._request())
        cleared = tuple(
            (t, tuple(self._turns[t])) for t in range(decision.first_turn, decision.last_turn + 1)
        )
        self._pending = Compact(
            decision, f"{self.spec.name}.c{self.cycle}.r{len(self._reductions) + 1}", cleared
        )
        self._state = "compacting"
        return self._pending

    def _request(self) -> ModelRequest:
        return ModelRequest(
            model=self.spec.model,
            messages=self.conversation() + self._transient,
            system=(self._system,),
            tools=self._tools,
            suggestor=self.spec.name,
            turn=self.turn,
            tool_choice=self.spec.tool_choice_at(self.turn) if self._tools else None,
        )

    def feed_reduction(self, text: str, replacement: Literal["stub", "summary"]) -> None:
        """Replace the pending span with `text` (a stub or a summary)."""
        pending = self._pending
        if self._state != "compacting" or pending is None:
            raise RuntimeError("no compaction is pending")
        step = pending.step
        message = Message.text("user", text)
        rendered = message_text(message)
        segments = apply_reduction(self._segments, step, self._count(rendered))
        after = total_tokens(segments, self._transient_tokens())
        self._pending = None
        if after >= step.tokens_before:
            self._finish(
                "context_exceeded",
                f"compacting turns {step.first_turn}-{step.last_turn} did not shrink the history "
                f"({step.tokens_before} -> {after} tokens, window {self.spec.policy.window})",
            )
            return
        self._segments = segments
        self._reductions[(step.first_turn, step.last_turn)] = message
        base: dict[str, Any] = {
            "suggestor": self.spec.name,
            "cycle": self.cycle,
            "reduction_id": pending.reduction_id,
            "first_turn": step.first_turn,
            "last_turn": step.last_turn,
        }
        self._event(
            SpanCleared(
                **base,
                turns=[
                    ClearedTurn.model_validate({"turn": t, "messages": messages_to_json(m)})
                    for t, m in pending.turns
                ],
            )
        )
        self._event(
            Compaction(
                **base,
                turn=self.turn,
                level=step.level,
                tokens_before=step.tokens_before,
                tokens_after=after,
                replacement=replacement,
            )
        )
        self._state = "check"

    def feed_reply(self, reply: Message) -> None:
        if self._state != "model":
            raise RuntimeError("no model call is pending")
        self._append(reply)
        if not reply.tool_calls:
            self._finish("completed")
            return
        self._calls = reply.tool_calls
        self._state = "tools"

    def feed_tool_results(
        self, results: Sequence[ToolResultPart], *, finished: bool = False
    ) -> None:
        if self._state != "tools":
            raise RuntimeError("no tool call is pending")
        for call, result in zip(self._calls, results, strict=True):
            self._event(
                ToolCalled(
                    suggestor=self.spec.name,
                    cycle=self.cycle,
                    turn=self.turn,
                    tool=call.name,
                    is_error=result.is_error,
                )
            )
        self._append(Message("tool", tuple(results)))
        if finished:
            self._finish("finished")
            return
        self.turn += 1
        self._state = "top"

    def stop(self, status: Status, detail: str = "") -> Done:
        """End the loop from outside (e.g. the run's model budget is spent)."""
        return self._finish(status, detail)
