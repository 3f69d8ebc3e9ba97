"""The agent tools: `context.read`, `context.propose`, `finish`, and MCP tools.

An MCP tool (`mcp:SERVER/TOOL`) is listed, checked and called through the run's
`ToolCaller` (`converge_dsl.tools.RunTools`): its input schema is the server's,
its result is capped and redacted there, and its failures are error results.

Tool input is validated against the tool's JSON Schema; a bad call (its
error names the JSON pointer of the field at fault), a call whose arguments
are not a JSON object (the position of the JSON error), an unknown tool, or a
tool error becomes an error *result* sent back to the model (tool errors are
soft). Proposals are collected into the agent's
effect; the engine's promotion gate decides on them like any other.

`context.read` returns each fact's `id`, `content` (text), `data` (JSON;
left out when the fact has none) and `confidence`; `context.propose` takes
text `content` and optional JSON `data` (an object given as `content` is
still accepted, and becomes the fact's data with its JSON text as content).
An id the promotion gate would refuse (`converge_dsl._fact_ids.id_refusal`: blank, a
control or hidden character, a `..` segment) is an error result at once, with the
gate's reason, so the model can propose it again under another id in its next turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from converge_dsl._fact_ids import id_refusal
from converge_dsl._json_pointer import error_pointer
from converge_dsl.compiler import ToolCaller
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.engine.types import (
    ContextView,
    Fact,
    ProposedFact,
    Provenance,
    canonical_json,
)
from converge_dsl.frontend import tool_reference
from converge_dsl.models.port import ToolCallPart, ToolResultPart, ToolSpec
from converge_dsl.sandbox import python_validator

TOOL_SPECS: dict[str, ToolSpec] = {
    "context.read": ToolSpec(
        "context.read",
        "Read the facts of a context key.",
        {
            "type": "object",
            "properties": {"key": {"type": "string", "minLength": 1}},
            "required": ["key"],
            "additionalProperties": False,
        },
    ),
    "context.propose": ToolSpec(
        "context.propose",
        "Propose a fact for the agent's target key.",
        {
            "type": "object",
            "properties": {
                "id": {"type": "string", "minLength": 1},
                "content": {"type": ["string", "object"]},
                "data": {},
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["id", "content"],
            "additionalProperties": False,
        },
    ),
    "finish": ToolSpec(
        "finish",
        "End the task; optionally give a one-line summary.",
        {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "additionalProperties": False,
        },
    ),
}

ALL_TOOLS: tuple[str, ...] = tuple(TOOL_SPECS)

_VALIDATORS = {name: python_validator(spec.input_schema) for name, spec in TOOL_SPECS.items()}


def _schema_error(name: str, data: Mapping[str, Any]) -> str | None:
    error = jsonschema.exceptions.best_match(_VALIDATORS[name].iter_errors(dict(data)))
    if error is None:
        return None
    return f"invalid input for {name} at {error_pointer(error) or 'the root'}: {error.message}"


def _fact_json(fact: Fact) -> dict[str, Any]:
    """A fact as `context.read` shows it: `data` only when the fact has some."""
    shown: dict[str, Any] = {"id": fact.id, "content": fact.content}
    if fact.data is not None:
        shown["data"] = fact.data
    shown["confidence"] = fact.confidence
    return shown


@dataclass(slots=True)
class ToolBox:
    """The tools of one agent execution, and the proposals they collected.

    `enabled` are its built-in tools; `mcp` the MCP tools offered (listed by the
    run's `caller`), `suggestor` the agent's name (for the caller's messages).
    """

    enabled: tuple[str, ...]
    ctx: ContextView
    target: str
    provenance: Provenance
    proposals: list[ProposedFact] = field(default_factory=list)
    finished: bool = False
    mcp: tuple[ToolSpec, ...] = ()
    caller: ToolCaller | None = None
    suggestor: str = ""
    cycle: int = 0

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        builtin = tuple(TOOL_SPECS[name] for name in self.enabled if name in TOOL_SPECS)
        return (*builtin, *self.mcp)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.specs)

    def run(self, calls: Sequence[ToolCallPart]) -> tuple[ToolResultPart, ...]:
        """The results of `calls` of built-in tools (an MCP tool's call is unknown here)."""
        return tuple(self._one(call) for call in calls)

    async def execute(self, calls: Sequence[ToolCallPart]) -> tuple[ToolResultPart, ...]:
        """The results of `calls`, MCP tools' through the run's caller, in order."""
        return tuple([await self._any(call) for call in calls])

    async def _any(self, call: ToolCallPart) -> ToolResultPart:
        reference = tool_reference(call.name)
        if reference is None or call.problem is not None or self.caller is None:
            return self._one(call)
        if call.name not in {spec.name for spec in self.mcp}:
            return self._one(call)
        server, tool = reference
        text, is_error = await self.caller.call(
            self.suggestor, self.cycle, server, tool, call.input, call_id=call.id
        )
        return ToolResultPart(call.id, text, is_error=is_error)

    def _one(self, call: ToolCallPart) -> ToolResultPart:
        names = self.names
        if call.name not in names:
            guess = did_you_mean(call.name, names)
            extra = "; " + suggestion(guess) if guess else ""
            return ToolResultPart(
                call.id,
                f"unknown tool {call.name!r}{extra} (available: {', '.join(names)})",
                is_error=True,
            )
        if call.problem is not None:  # the model wrote arguments no one can read
            return ToolResultPart(
                call.id,
                f"invalid call of {call.name}: {call.problem}; call it again with the "
                "arguments as one JSON object",
                is_error=True,
            )
        problem = _schema_error(call.name, call.input)
        if problem is not None:
            return ToolResultPart(call.id, problem, is_error=True)
        if call.name == "context.read":
            return self._read(call)
        if call.name == "context.propose":
            return self._propose(call)
        self.finished = True
        return ToolResultPart(call.id, "finished")

    def _read(self, call: ToolCallPart) -> ToolResultPart:
        facts = [_fact_json(f) for f in self.ctx.get(str(call.input["key"]))]
        return ToolResultPart(call.id, json.dumps(facts, ensure_ascii=False, sort_keys=True))

    def _propose(self, call: ToolCallPart) -> ToolResultPart:
        refused = id_refusal(str(call.input["id"]))
        if refused is not None:
            return ToolResultPart(call.id, f"{refused}; use another id", is_error=True)
        proposal = ProposedFact(
            key=self.target,
            id=str(call.input["id"]),
            content=call.input["content"],
            confidence=float(call.input.get("confidence", 1.0)),
            provenance=self.provenance,
            data=call.input.get("data"),
        )
        for earlier in self.proposals:
            if earlier.id == proposal.id:
                if earlier.content == proposal.content and canonical_json(
                    earlier.data
                ) == canonical_json(proposal.data):
                    return ToolResultPart(call.id, f"already proposed {proposal.id!r}")
                return ToolResultPart(
                    call.id,
                    f"id {proposal.id!r} was already proposed with other content or data; "
                    "use a new id",
                    is_error=True,
                )
        self.proposals.append(proposal)
        return ToolResultPart(call.id, f"proposed {self.target}/{proposal.id}")
