"""One model call under a reservation of the run's usage meter.

The llm suggestor, the agent's turn loop and the summarizer call a model the
same way (docs/architecture.md §7, §8):
- hold one call, the request's input estimate and its answer's cap before the
  request; under a token budget the request is sent with the cap the meter
  grants (its own `max_tokens`, or the model's configured one, bounded by
  what remains of the budget after every other reservation in flight);
- settle it with the usage the server reports, also when the answer is then
  found unusable, and with none when the call failed or was cancelled in flight
  (it reached a model all the same);
- a model that refuses a retry for the run's budget (`E_BUDGET_EXHAUSTED`)
  ends the call with no answer, and the meter learns which budget stops the run;
- the answer cache is asked first (`cached_answer`, through the wrappers): a hit
  is answered with no reservation at all, so it counts toward no budget and is
  given even once a budget is spent; a miss is reserved as above and not looked
  up again (`CACHE_PROBE`), so the budget stays exact for the calls that reach a
  model. An answer the cache gives without that probe (`CALL_NOTE` marked
  cached) gives its reservation back.
A server that ignores the cap can answer with more output tokens than the cap:
the call's `overshoot` says by how many, for the caller to report.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from converge_dsl.models._call_note import CACHE_PROBE, CALL_NOTE, CacheProbe, CallNote
from converge_dsl.models._common import estimate_tokens, request_text
from converge_dsl.models.port import (
    Model,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    Usage,
    cached_answer,
)


class Settleable(Protocol):
    max_tokens: int | None

    def settle(self, usage: Usage | None = None) -> int: ...

    def release(self) -> None: ...


class CallMeter(Protocol):
    """What a metered call needs of the run's usage meter."""

    async def reserve_call(
        self, tokens_estimate: int = 0, answer_cap: int | None = None
    ) -> Settleable | None: ...

    def note_budget_refusal(self) -> object: ...


@dataclass(frozen=True, slots=True)
class Metered:
    """A metered call's answer; `max_tokens` is the cap it was sent with, `overshoot`
    the output tokens by which the answer passed that cap (0: within it)."""

    answer: ModelReturn
    max_tokens: int | None = None
    overshoot: int = 0
    cached: bool = False

    def overshoot_note(self) -> str | None:
        """The report of an overshoot (None without one): what was used, held and capped."""
        if self.overshoot <= 0:
            return None
        usage = self.answer.usage
        return (
            f"the model answered with {usage.output_tokens} output tokens, {self.overshoot} "
            f"past the max_tokens {self.max_tokens} the request was sent with: the server "
            "does not honour the cap, so the token budget can be passed by that much"
        )


def configured_cap(model: Model) -> int | None:
    """The answer cap `model` sends when a request names none (None: unbounded)."""
    cap = getattr(model, "default_max_tokens", None)
    value = cap() if callable(cap) else None
    return value if isinstance(value, int) else None


async def metered_call(
    model: Model,
    request: ModelRequest,
    meter: CallMeter | None,
    tokens_estimate: int | None = None,
) -> Metered | None:
    """`model.call(request)` counted by `meter`; None when the run's budget refused it.

    `tokens_estimate` defaults to a quarter of the characters the model reads.
    Without a meter the call is made as it is. Any other `ModelError` is raised
    for the caller to translate.
    """
    if meter is None:
        return Metered(await model.call(request), request.max_tokens)
    hit = cached_answer(model, request)
    if hit is not None:
        return await _unreserved(model, request, hit)
    estimate = (
        estimate_tokens(request_text(request)) if tokens_estimate is None else tokens_estimate
    )
    wanted = request.max_tokens if request.max_tokens is not None else configured_cap(model)
    reservation = await meter.reserve_call(estimate, wanted)
    if reservation is None:
        return None
    if reservation.max_tokens != wanted:  # the budget lowered the cap: send the lower one
        request = replace(request, max_tokens=reservation.max_tokens)
    note = CallNote()
    token = CALL_NOTE.set(note)
    probed = CACHE_PROBE.set(CacheProbe(request, None))  # looked up above: a miss
    try:
        answer = await model.call(request)
    except ModelError as exc:
        if exc.code is ModelErrorCode.CACHE_MISS:  # `--offline`: nothing reached a model
            reservation.release()
            raise
        reservation.settle()
        if exc.code is not ModelErrorCode.BUDGET_EXHAUSTED:
            raise
        meter.note_budget_refusal()
        return None
    except BaseException:  # cancelled in flight: the call was made all the same
        reservation.settle()
        raise
    finally:
        CACHE_PROBE.reset(probed)
        CALL_NOTE.reset(token)
    if note.cached:
        reservation.release()
        return Metered(answer, reservation.max_tokens, 0, cached=True)
    overshoot = reservation.settle(answer.usage)
    return Metered(answer, reservation.max_tokens, overshoot)


async def _unreserved(model: Model, request: ModelRequest, hit: ModelReturn) -> Metered:
    """The call of `request` that the cache answers with `hit`, through every wrapper (so
    the trace and the report see a cached call), holding no reservation."""
    token = CALL_NOTE.set(CallNote())
    probed = CACHE_PROBE.set(CacheProbe(request, hit))
    try:
        answer = await model.call(request)
    finally:
        CACHE_PROBE.reset(probed)
        CALL_NOTE.reset(token)
    return Metered(answer, request.max_tokens, 0, cached=True)
