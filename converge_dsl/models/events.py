"""Model-call trace events, and the hook through which an adapter reports its attempts.

A traced model (the runtime wraps every model of a run whose events are
listened to) emits `model_call_started` before a call and
`model_call_finished` after it, with the attempts it took, the token usage,
the status and the latency. An adapter that retries (the HTTP one) reports
each attempt to `ATTEMPT_OBSERVER`, a context variable the traced model sets
for the duration of its call; the traced model turns each report into a
`model_call_attempt` event. Adapters that make no request (scripted, replay)
report nothing: their call is one attempt.

Every field but `timing` is deterministic under deterministic models (the
call number counts calls in the order they start within a run).

`purpose` says what a call is for within its suggestor: `turn` (one of an
agent's turns, with its number), `summary` (an agent's summarizer side call:
the caller says so through `CALL_PURPOSE`), `repair` (an llm suggestor asking
again for an answer that was not JSON or did not fit its schema, `output.retries`)
or `answer` (any other call, such as an llm suggestor's first call), so a trace
and its report tell a summary or a repair call from a turn.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from converge_dsl.clock import Clock
from converge_dsl.engine.events import JSON_CONFIG, Timing

Purpose = Literal["turn", "summary", "answer", "repair"]


@dataclass(frozen=True, slots=True)
class AttemptReport:
    """One request an adapter sent: when (monotonic seconds), on which account, and how it
    ended (`status_code` is the HTTP status when a response came, `error` the error code
    when the attempt failed)."""

    started: float
    ended: float
    account: str | None
    status_code: int | None
    error: str | None


ATTEMPT_OBSERVER: ContextVar[Callable[[AttemptReport], None] | None] = ContextVar(
    "converge_dsl_attempt_observer", default=None
)


CALL_PURPOSE: ContextVar[Purpose | None] = ContextVar("converge_dsl_call_purpose", default=None)
"""What the current model call is for, when its caller says so (the agents' summarizer
sets `summary`); a traced call reads it for its `purpose`."""


GATE_LOG: ContextVar[Callable[[str], None] | None] = ContextVar(
    "converge_dsl_gate_log", default=None
)
"""Who hears each budget decision on a further attempt of the current call: `allowed`
and `refused` (the attempt gate's answer) or `deadline` (no time left). A recording
model sets it for its call, so a replay asks the run's gate the same way, in the
same order."""


def note_gate(decision: str) -> None:
    """Note one budget decision of the current call (if a recorder listens)."""
    log = GATE_LOG.get()
    if log is not None:
        log(decision)


def report_attempt(
    started: float, clock: Clock, account: str | None, status: int | None, error: str | None
) -> None:
    """Tell the observer of the current call (if any) about an attempt that began at
    `started` and ends now on `clock`."""
    observer = ATTEMPT_OBSERVER.get()
    if observer is not None:
        observer(AttemptReport(started, clock.monotonic(), account, status, error))


class _ModelEvent(BaseModel):
    model_config = ConfigDict(**JSON_CONFIG, extra="forbid")

    timing: Timing | None = None
    call: int = Field(description="1-based number of the call in its run, in order of start")
    model: str = Field(description="the model's name in the pipeline (`models.<name>`)")
    suggestor: str | None = Field(description="the suggestor that made the call, when known")
    purpose: Purpose | None = Field(
        default=None,
        description='what the call is for: "turn" (an agent\'s turn), "summary" (an agent\'s '
        'summarizer side call), "repair" (an llm suggestor asking again for an unusable '
        'answer, output.retries) or "answer" (any other call); absent in older traces',
    )


class ModelCallStarted(_ModelEvent):
    type: Literal["model_call_started"] = "model_call_started"
    turn: int | None = Field(default=None, description="the agent turn, for an agent's call")


class ModelCallAttempt(_ModelEvent):
    type: Literal["model_call_attempt"] = "model_call_attempt"
    attempt: int = Field(description="1-based attempt number within the call")
    account: str | None = None
    status_code: int | None = Field(description="HTTP status of the response, if one came")
    error: str | None = Field(description="error code (E_...) when the attempt failed")


class ModelCallFinished(_ModelEvent):
    type: Literal["model_call_finished"] = "model_call_finished"
    status: str = Field(description='"ok", or the error code (E_...) the call failed with')
    status_code: int | None = Field(description="HTTP status of the last attempt, if any")
    attempts: int = Field(description="requests made (1 for a model that sends none)")
    model_id: str | None = Field(description="the provider's model id, when the call answered")
    account: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    cached: bool | None = Field(
        default=None,
        description="true when the answer came from the answer cache (only present then)",
        exclude_if=lambda value: value is None,
    )


MODEL_EVENTS: tuple[type[BaseModel], ...] = (ModelCallStarted, ModelCallAttempt, ModelCallFinished)


def purpose_of(turn: int | None) -> Purpose:
    """The `purpose` of a call whose request has `turn`: what `CALL_PURPOSE` says, else a
    `turn` when it has one, else an `answer`."""
    said = CALL_PURPOSE.get()
    if said is not None:
        return said
    return "turn" if turn is not None else "answer"
