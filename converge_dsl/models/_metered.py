"""One model call under a reservation of the run's usage meter.

The llm suggestor and the agent's turn loop call a model the same way: hold
one call (and a token estimate) before the request, settle it with the real
usage after, and settle it too when the call failed or was cancelled in
flight (it reached a model all the same). A model that refuses a retry for
the run's budget (`E_BUDGET_EXHAUSTED`) ends the call with no answer, and the
meter learns which budget stops the run (docs/architecture.md §7, §8).
"""

from __future__ import annotations

from typing import Protocol

from converge_dsl.models.port import (
    Model,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    Usage,
)


class Settleable(Protocol):
    def settle(self, usage: Usage | None = None) -> None: ...


class CallMeter(Protocol):
    """What a metered call needs of the run's usage meter."""

    def reserve(self, tokens_estimate: int = 0) -> Settleable | None: ...

    def note_budget_refusal(self) -> object: ...


async def metered_call(
    model: Model, request: ModelRequest, meter: CallMeter | None, tokens_estimate: int = 0
) -> ModelReturn | None:
    """`model.call(request)` counted by `meter`; None when the run's budget refused it.

    Without a meter the call is made as it is. Any other `ModelError` is raised
    for the caller to translate.
    """
    if meter is None:
        return await model.call(request)
    reservation = meter.reserve(tokens_estimate)
    if reservation is None:
        return None
    try:
        answer = await model.call(request)
    except ModelError as exc:
        reservation.settle()
        if exc.code is not ModelErrorCode.BUDGET_EXHAUSTED:
            raise
        meter.note_budget_refusal()
        return None
    except BaseException:  # cancelled in flight: the call was made all the same
        reservation.settle()
        raise
    reservation.settle(answer.usage)
    return answer
