"""Context contributors (docs/architecture.md §9): the policy of what to inject before a turn.

The mechanism (asked at the top of every turn, in registration order, before
the model call) belongs to the turn loop; each contributor only decides what
message, if any, to add. Contributor objects are created per execution, so a
`facts` contributor remembers what this conversation has already seen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from converge_dsl.agents._spec import ContributorSpec
from converge_dsl.compiler import CompiledTemplate
from converge_dsl.engine.types import ContextView
from converge_dsl.models.port import Message


@dataclass(frozen=True, slots=True)
class TurnEnv:
    """What a contributor may look at: the render scope of the view, the goal, the cycle."""

    scope: Mapping[str, Any]
    ctx: ContextView
    goal: str
    suggestor: str

    def render(self, template: CompiledTemplate, turn: int, conversation: Sequence[Message]) -> str:
        names = {
            **self.scope,
            "goal": self.goal,
            "turn": turn,
            "conversation": [{"role": m.role, "text": m.text_content} for m in conversation],
        }
        return template.render(names, suggestor=self.suggestor, cycle=self.ctx.cycle)


def facts_block(ctx: ContextView, keys: Sequence[str]) -> str:
    lines = []
    for key in keys:
        for f in ctx.get(key):
            lines.append(f"- {key}/{f.id}: {f.content_text()}")
    return "\n".join(lines)


class Contributor:
    """One declared contributor, for one execution of its agent."""

    def __init__(self, spec: ContributorSpec) -> None:
        self.spec = spec
        self._seen: str | None = None
        self._kinds: dict[str, Callable[[int, Sequence[Message], TurnEnv], str | None]] = {
            "reminder": self._reminder,
            "plan": self._plan,
            "facts": self._facts,
            "template": self._template,
        }

    def contribute(
        self, turn: int, conversation: Sequence[Message], env: TurnEnv
    ) -> Message | None:
        text = self._kinds[self.spec.kind](turn, conversation, env)
        if text is None or not text.strip():
            return None
        return Message.text(self.spec.role, text)

    def _reminder(self, turn: int, conversation: Sequence[Message], env: TurnEnv) -> str | None:
        every = self.spec.every
        if every <= 0 or turn == 0 or turn % every or self.spec.template is None:
            return None
        return env.render(self.spec.template, turn, conversation)

    def _plan(self, turn: int, conversation: Sequence[Message], env: TurnEnv) -> str | None:
        block = facts_block(env.ctx, self.spec.keys)
        return f"Plan:\n{block}" if block else None

    def _facts(self, turn: int, conversation: Sequence[Message], env: TurnEnv) -> str | None:
        block = facts_block(env.ctx, self.spec.keys)
        if not block or block == self._seen:
            return None
        self._seen = block
        return f"Facts ({', '.join(self.spec.keys)}):\n{block}"

    def _template(self, turn: int, conversation: Sequence[Message], env: TurnEnv) -> str | None:
        assert self.spec.template is not None
        return env.render(self.spec.template, turn, conversation)
