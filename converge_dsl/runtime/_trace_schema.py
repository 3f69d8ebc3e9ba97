"""The JSON Schema of a trace line (`schemas/trace-event.v1.json`): the envelope and every event.

A line is the envelope of `TraceLine` (`seq`, `type`, `span`, `time`) plus the
fields of its event. The schema lists every event type the runtime writes
(`TRACE_EVENTS`: the engine's, the agents', the model calls'); for each, a
definition `<Event>Line` holds the envelope and the event's own fields with no
others, and the top level picks the definition by `type`. A type not listed
is invalid: adding an event type is a change of this contract.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def trace_events() -> tuple[type[BaseModel], ...]:
    """Every event model a trace line can hold, in the order the schema lists them."""
    from converge_dsl import agents as agent
    from converge_dsl.engine import events as engine
    from converge_dsl.models.events import MODEL_EVENTS
    from converge_dsl.tools import McpToolCalled

    return (
        engine.RunStarted,
        engine.CycleStarted,
        engine.SuggestorStarted,
        engine.SuggestorFinished,
        engine.SuggestorFailed,
        engine.ProposalRejected,
        engine.ProposalPending,
        engine.ProposalDecided,
        engine.FactPromoted,
        engine.InvariantChecked,
        engine.CycleFinished,
        engine.HitlPaused,
        engine.RunFinished,
        *MODEL_EVENTS,
        agent.AgentTurnStarted,
        agent.ContributorFired,
        agent.ToolCalled,
        McpToolCalled,
        agent.Compaction,
        agent.SpanCleared,
        agent.SummaryTaken,
        agent.SummaryFallback,
        agent.AgentFinished,
    )


def event_type(model: type[BaseModel]) -> str:
    """The `type` literal of an event model."""
    value = model.model_fields["type"].default
    assert isinstance(value, str)
    return value


def trace_line_schema(envelope: type[BaseModel]) -> dict[str, Any]:
    """The schema of one trace line: `envelope`'s fields, and each event's by its `type`."""
    schema = envelope.model_json_schema(ref_template="#/$defs/{model}")
    defs: dict[str, Any] = schema.pop("$defs", {})
    head = schema["properties"]
    types: list[str] = []
    branches: list[dict[str, Any]] = []
    for model in trace_events():
        kind = event_type(model)
        types.append(kind)
        own = model.model_json_schema(ref_template="#/$defs/{model}", mode="serialization")
        defs.update(own.pop("$defs", {}))
        fields = {name: spec for name, spec in own["properties"].items() if name != "type"}
        name = f"{model.__name__}Line"
        defs[name] = {
            "title": name,
            "description": (model.__doc__ or f"A `{kind}` event.").strip().splitlines()[0],
            "type": "object",
            "properties": {
                **{key: {"$ref": f"#/properties/{key}"} for key in head},
                "type": {"const": kind},
                **fields,
            },
            "required": sorted({*schema.get("required", ()), *own.get("required", ())}),
            "additionalProperties": False,
        }
        branches.append(
            {"if": {"properties": {"type": {"const": kind}}}, "then": {"$ref": f"#/$defs/{name}"}}
        )
    head["type"] = {**head["type"], "enum": types}
    schema["additionalProperties"] = True
    schema["allOf"] = branches
    schema["$defs"] = dict(sorted(defs.items()))
    return schema
