"""The typed event stream of a run: what a trace is written from.

Every event is a frozen pydantic model with a `type` discriminator. All
fields are deterministic (same pipeline, same inputs, deterministic models =>
same events) except `timing`, which holds clock readings and durations and
is dropped when runs are compared (`deterministic_dump`). `FactPromoted`,
`ProposalPending` and `ProposalDecided` carry the fact's `data` when it has some (the field is left
out of a dump when it is None). Other packages
(agents, runtime) emit their own pydantic event models into the same
`EventSink`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

EventSink = Callable[[BaseModel], None]
Model = TypeVar("Model", bound=BaseModel)

# An event model's configuration: frozen, built on first use, and written as JSON
# (`model_dump_json`) with the numbers JSON cannot hold as `json.dumps` writes them
# (`NaN`, `Infinity`), so that its JSON decodes to its `model_dump(mode="json")`.
JSON_CONFIG = ConfigDict(frozen=True, defer_build=True, ser_json_inf_nan="constants")


class Timing(BaseModel):
    """Clock readings (seconds, from the injected clock): never compared between runs.

    `at` is when the event happened on the run's monotonic clock (only
    differences between two `at` of one trace mean anything); `duration_s` is
    how long the thing the event ends took (a suggestor's execution, a model
    call or attempt, the whole run). A `suggestor_finished` or
    `suggestor_failed` event's `at` is the moment its execution ended, so the
    execution ran from `at - duration_s` to `at`.
    """

    model_config = JSON_CONFIG

    at: float = Field(description="monotonic seconds (arbitrary origin) when the event happened")
    duration_s: float | None = Field(
        default=None, description="seconds the work this event ends took, when it ends some"
    )


class _Event(BaseModel):
    model_config = JSON_CONFIG

    timing: Timing | None = None


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    suggestors: int
    seeds: int
    resumed_from_cycle: int | None = None
    budget: dict[str, int | float | None] | None = Field(
        default=None,
        description="the run's limits (max_cycles, max_facts, max_model_calls, max_tokens, "
        "max_wall_s, max_concurrency; null = unlimited)",
    )


class CycleStarted(_Event):
    type: Literal["cycle_started"] = "cycle_started"
    cycle: int
    dirty_keys: tuple[str, ...]
    candidates: tuple[str, ...]


class SuggestorStarted(_Event):
    type: Literal["suggestor_started"] = "suggestor_started"
    cycle: int
    suggestor: str


class SuggestorFinished(_Event):
    type: Literal["suggestor_finished"] = "suggestor_finished"
    cycle: int
    suggestor: str
    proposals: int


class SuggestorFailed(_Event):
    type: Literal["suggestor_failed"] = "suggestor_failed"
    cycle: int
    suggestor: str
    error: str


class ProposalRejected(_Event):
    type: Literal["proposal_rejected"] = "proposal_rejected"
    cycle: int
    suggestor: str
    key: str
    id: str
    reason: str


def _is_none(value: Any) -> bool:
    return value is None


class ProposalPending(_Event):
    """A proposal held for a human decision (human-in-the-loop gate)."""

    type: Literal["proposal_pending"] = "proposal_pending"
    cycle: int
    suggestor: str
    key: str
    id: str
    reason: str
    data: Any = Field(default=None, exclude_if=_is_none)


class ProposalDecided(_Event):
    """A human's decision on a pending proposal, applied as a paused run resumes.

    `cycle`, `suggestor`, `key`, `id`, `reason` (why it waited) and `data` are
    the pending proposal's; `decision` is `approved` (the fact is promoted next,
    gate `human`) or `rejected` (the id is dropped whenever proposed again);
    `by` is who gave it: `cli` (`--approve`, `--reject`), `file:NAME` (the
    `--decisions` file the user named), `api` (a program's call), left out
    when the caller did not say. A resumed run emits one per pending proposal,
    in pending order, right after `run_started`.
    """

    type: Literal["proposal_decided"] = "proposal_decided"
    cycle: int
    suggestor: str
    key: str
    id: str
    decision: Literal["approved", "rejected"]
    reason: str
    by: str | None = Field(default=None, exclude_if=_is_none)
    data: Any = Field(default=None, exclude_if=_is_none)


class FactPromoted(_Event):
    type: Literal["fact_promoted"] = "fact_promoted"
    cycle: int
    suggestor: str | None
    key: str
    id: str
    gate: str
    logical_time: int
    data: Any = Field(default=None, exclude_if=_is_none)
    content: str | None = Field(default=None, description="the fact's text")
    confidence: float | None = None
    source: str | None = Field(default=None, description="provenance: `suggestor@pipeline`")
    model_id: str | None = Field(default=None, description="provenance: the model that wrote it")
    account: str | None = Field(default=None, description="provenance: the provider account")


class InvariantChecked(_Event):
    type: Literal["invariant_checked"] = "invariant_checked"
    cycle: int
    invariant: str
    invariant_class: str
    critical: bool
    holds: bool
    message: str | None = None


class CycleFinished(_Event):
    type: Literal["cycle_finished"] = "cycle_finished"
    cycle: int
    promoted: int
    dirty_keys: tuple[str, ...]
    facts: int | None = Field(default=None, description="facts in the context at the cycle's end")
    model_calls: int | None = Field(default=None, description="model calls of the run so far")
    input_tokens: int | None = Field(default=None, description="input tokens of the run so far")
    output_tokens: int | None = Field(default=None, description="output tokens of the run so far")


class HitlPaused(_Event):
    type: Literal["hitl_paused"] = "hitl_paused"
    cycle: int
    pending: tuple[str, ...]


class RunFinished(_Event):
    type: Literal["run_finished"] = "run_finished"
    cycles: int
    stop_reason: str
    facts: int
    error: str | None = None


EngineEvent = Annotated[
    RunStarted
    | CycleStarted
    | SuggestorStarted
    | SuggestorFinished
    | SuggestorFailed
    | ProposalRejected
    | ProposalPending
    | ProposalDecided
    | FactPromoted
    | InvariantChecked
    | CycleFinished
    | HitlPaused
    | RunFinished,
    Field(discriminator="type"),
]

ENGINE_EVENT_ADAPTER: TypeAdapter[EngineEvent] = TypeAdapter(
    EngineEvent, config=ConfigDict(defer_build=True)
)


def from_fields(kind: type[Model], fields: dict[str, Any]) -> Model:
    """`kind(**fields)`: the same validation and the same model, made by `kind`'s validator
    on `fields` without the keyword call (a third cheaper; how the engine builds its events).
    A field of the wrong type is refused alike (`pydantic.ValidationError`)."""
    made: Model = kind.__pydantic_validator__.validate_python(fields)
    return made


def deterministic_dump(event: BaseModel) -> dict[str, Any]:
    """The event as JSON-ready data without its `timing` (what determinism compares)."""
    return event.model_dump(mode="json", exclude={"timing"})
