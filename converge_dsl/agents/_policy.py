"""The compaction and summary-budget policy, shared by the turn loop and `plan`.

Everything here is pure arithmetic over sizes, so `converge-dsl plan` can
simulate turns without a model and reach exactly the decisions the real loop
reaches (the summarizer's `SummaryBudget` is in `_summary_budget`). The
history is a tuple of `Segment`s: the preamble (system text, tools, goal;
never cleared), one segment per turn, and one per reduction (a stub or
summary that replaced a span of turns).

Compaction, decided at the top of each turn with transient messages counted:
- below `threshold * window`: nothing;
- at or above it (normal): clear the uncleared turns older than `keep_turns`;
  if none is old enough, nothing happens this turn;
- at or above `emergency * window`: clear every completed turn but the last;
  if nothing can be cleared, the agent fails with `context_exceeded`.
A reduction that does not make the history smaller also fails the agent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from converge_dsl.engine.types import canonical_json
from converge_dsl.models.port import Message, TextPart, ToolCallPart

TokenCounter = Callable[[str], int]
Level = Literal["normal", "emergency"]


def default_token_counter(text: str) -> int:
    """About four characters per token, rounded up."""
    return -(-len(text) // 4)


def message_text(message: Message) -> str:
    """The text a message is measured by (and a cleared span is summarised from)."""
    pieces = [f"{message.role}: "]
    for part in message.parts:
        if isinstance(part, TextPart):
            pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            pieces.append(f"[call {part.name} {canonical_json(dict(part.input))}]")
        else:
            flag = " error" if part.is_error else ""
            pieces.append(f"[result{flag}] {part.output}")
    return "".join(pieces)


@dataclass(frozen=True, slots=True)
class Segment:
    """A measured slice of the history. `first_turn`/`last_turn` are -1 for the preamble."""

    kind: Literal["preamble", "turn", "reduction"]
    first_turn: int
    last_turn: int
    tokens: int

    def grow(self, tokens: int) -> Segment:
        return replace(self, tokens=self.tokens + tokens)


def stub_text(first: int, last: int) -> str:
    span = f"turn {first}" if first == last else f"turns {first}-{last}"
    return f"[{span} cleared]"


def summary_text(first: int, last: int, summary: str) -> str:
    span = f"turn {first}" if first == last else f"turns {first}-{last}"
    return f"[summary of {span}] {summary}"


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    window: int
    threshold: float = 0.8
    emergency: float = 0.95
    keep_turns: int = 4

    def level(self, tokens: int) -> Level | None:
        if tokens >= self.emergency * self.window:
            return "emergency"
        if tokens >= self.threshold * self.window:
            return "normal"
        return None


@dataclass(frozen=True, slots=True)
class CompactionStep:
    """Clear turns `first..last` (indices into the segment tuple: `start..stop`)."""

    level: Level
    first_turn: int
    last_turn: int
    start: int
    stop: int
    tokens_before: int


@dataclass(frozen=True, slots=True)
class Exceeded:
    tokens: int
    reason: str


def total_tokens(segments: Sequence[Segment], transient_tokens: int = 0) -> int:
    return sum(s.tokens for s in segments) + transient_tokens


def next_compaction(
    policy: CompactionPolicy, segments: Sequence[Segment], transient_tokens: int, turn: int
) -> CompactionStep | Exceeded | None:
    """What to do before the model call of `turn`; None means call the model."""
    tokens = total_tokens(segments, transient_tokens)
    level = policy.level(tokens)
    if level is None:
        return None
    newest = turn - 1 if level == "emergency" else turn - policy.keep_turns
    # The span: the uncleared turns after the last reduction and before `newest`.
    stop = start = None
    for index, seg in enumerate(segments):
        if seg.kind == "turn" and seg.first_turn < newest:
            start = index if start is None else start
            stop = index + 1
        elif seg.kind == "reduction":
            start = stop = None
    if start is None or stop is None:
        if level == "normal":
            return None
        return Exceeded(
            tokens, f"{tokens} tokens against a window of {policy.window} and no turn left to clear"
        )
    return CompactionStep(
        level, segments[start].first_turn, segments[stop - 1].last_turn, start, stop, tokens
    )


def apply_reduction(
    segments: Sequence[Segment], step: CompactionStep, tokens: int
) -> tuple[Segment, ...]:
    reduction = Segment("reduction", step.first_turn, step.last_turn, tokens)
    return (*segments[: step.start], reduction, *segments[step.stop :])
