"""Budgets, the usage meter, and the reasons a run stops.

`Budget` bounds a run. `UsageMeter` counts model calls and tokens and knows the
run's wall-clock deadline: the engine owns one (`Engine.usage`). Budgets are
reservations (docs/architecture.md §7): before a model call, an LLM suggestor,
agent or summarizer takes a `Reservation` (`reserve`) of one call, its input
estimate and its answer's cap, and settles it with the real usage (`settle`) or
gives it back (`release`). Outstanding reservations count against the limits, so
concurrent calls never take the meter past `max_model_calls`. Under `max_tokens`
the answer's cap is what remains of the budget after every spent and held token
and the call's input estimate (`answer_room`): the call sends that cap as its
`max_tokens`, and a call left less than `MIN_ANSWER_TOKENS` is refused
(`token_budget_exhausted`). A call refused only because tokens are held by calls
in flight waits for them (`reserve_call`). Every further attempt of a call that
reaches a server (a provider retry or failover) consumes one more call through
`allow_attempt`, the models' attempt gate. A refused call is remembered
(`refused`) so the engine stops the run with the matching reason after the cycle
instead of reporting a fixed point. `can_call`/`record` remain for callers that
meter after the fact.

The meter also counts what each suggestor spent (`spent_by`, `refused_by`):
the engine runs every `execute` with `SPENDER` set to the suggestor's name, so
calls, attempts and tokens are attributed to whoever made them, which is how
a budget stop names the suggestors that spent the budget. A meter that also
counts against a cap beyond the run's own budget (a batch's `--max-model-calls`)
remembers, with a refusal that cap made, its `OuterCap` (`refused_cap`), so the
stop names the cap that was the cause rather than the run's own setting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from converge_dsl.clock import Clock

# The suggestor whose `execute` is running in this task (None outside one).
SPENDER: ContextVar[str | None] = ContextVar("converge_dsl_spender", default=None)


class StopReason(StrEnum):
    """Why a run stopped (docs/architecture.md §7)."""

    CONVERGED = "converged"
    CYCLE_BUDGET_EXHAUSTED = "cycle_budget_exhausted"
    FACT_BUDGET_EXHAUSTED = "fact_budget_exhausted"
    TOKEN_BUDGET_EXHAUSTED = "token_budget_exhausted"
    MODEL_CALL_BUDGET_EXHAUSTED = "model_call_budget_exhausted"
    TOOL_CALL_BUDGET_EXHAUSTED = "tool_call_budget_exhausted"
    TIME_BUDGET_EXHAUSTED = "time_budget_exhausted"
    INVARIANT_VIOLATED = "invariant_violated"
    HITL_PAUSE = "hitl_pause"
    CANCELLED = "cancelled"
    ERROR = "error"


# The wall-clock limit of a run that sets none (`budget.max_wall_s` raises it):
# no run, and no template, expression or validation inside it, runs unbounded.
DEFAULT_MAX_WALL_S = 600.0

MIN_ANSWER_TOKENS = 16
"""The smallest answer cap worth a call under a token budget; a call that asks
for a smaller cap (its own `max_tokens`) needs only that."""


def answer_room(
    limit: int | None, taken: int, estimate: int, wanted: int | None
) -> tuple[bool, int | None]:
    """`(fits, cap)`: the answer cap a call may send under a token `limit`.

    `taken` counts the tokens spent and held by reservations in flight,
    `estimate` the call's input, `wanted` the cap it asks for (None: any).
    Without a limit the cap is `wanted`; with one it is `wanted` bounded by
    what remains, and the call fits only when that is at least
    `MIN_ANSWER_TOKENS` (or `wanted`, when smaller).
    """
    if limit is None:
        return True, wanted
    room = limit - taken - max(0, estimate)
    cap = room if wanted is None else min(wanted, room)
    needed = MIN_ANSWER_TOKENS if wanted is None else min(wanted, MIN_ANSWER_TOKENS)
    return cap >= max(1, needed), max(0, cap)


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one run. `None` means unlimited (`max_wall_s` defaults to 600 s)."""

    max_cycles: int = 100
    max_facts: int = 10000
    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_wall_s: float | None = DEFAULT_MAX_WALL_S
    max_concurrency: int = 32
    max_tool_calls: int | None = None  # MCP tool calls; counted by the run's tools

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")


@dataclass(frozen=True, slots=True)
class OuterCap:
    """A cap beyond the run's own `Budget` that refused one of its calls, as a stop names it.

    `setting` is how the user sets it (`--max-model-calls`), `limit` its value,
    `owner` whose cap it is (`the batch`).
    """

    setting: str
    limit: int
    owner: str


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Model usage so far. Tokens count input plus output against `max_tokens`."""

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class TokenUsage(Protocol):
    """What a settled call reports: the model port's `Usage` has these fields."""

    @property
    def input_tokens(self) -> int: ...

    @property
    def output_tokens(self) -> int: ...


class Reservation:
    """One model call (its input estimate and answer cap) held against the meter until settled.

    `max_tokens` is the answer cap the call must send (None: unbounded, no
    token budget and no cap asked for); the reservation holds the estimate
    plus that cap. `settle(usage)` counts the call with its real tokens and
    returns by how many output tokens the answer passed its cap (0: within it,
    or no cap: a server that ignores the cap is the one way past it);
    `release()` gives the call back (it never reached a model). Only the
    first of the two has an effect; later calls are ignored, so a
    `finally: release()` is always safe.
    """

    __slots__ = ("_meter", "_open", "_tokens", "max_tokens")

    def __init__(self, meter: UsageMeter, tokens: int, max_tokens: int | None = None) -> None:
        self._meter = meter
        self._tokens = tokens
        self._open = True
        self.max_tokens = max_tokens

    @property
    def held_tokens(self) -> int:
        """The tokens this reservation holds: the input estimate plus the answer cap."""
        return self._tokens

    def settle(self, usage: TokenUsage | None = None) -> int:
        """Count the reserved call with `usage`'s tokens (None: no tokens known); the
        output tokens by which the answer passed `max_tokens` (0 when within it)."""
        if not self._open:
            return 0
        self._open = False
        tokens_in = 0 if usage is None else usage.input_tokens
        tokens_out = 0 if usage is None else usage.output_tokens
        self._meter._settle(self._tokens, tokens_in, tokens_out)  # the meter's bookkeeping
        return 0 if self.max_tokens is None else max(0, tokens_out - self.max_tokens)

    def release(self) -> None:
        """Give the reserved call back: it was never made."""
        if self._open:
            self._open = False
            self._meter._unhold(self._tokens)


class UsageMeter:
    """Counts model calls and tokens against a `Budget`; with a clock, watches the deadline too."""

    __slots__ = (
        "_budget",
        "_by",
        "_cache_ahead",
        "_calls",
        "_clock",
        "_deadline",
        "_freed",
        "_held_calls",
        "_held_tokens",
        "_input",
        "_output",
        "_refused",
        "_refused_by",
        "_refused_cap",
        "_tools_by",
    )

    def __init__(
        self, budget: Budget, start: UsageTotals | None = None, *, clock: Clock | None = None
    ) -> None:
        self._budget = budget
        self._clock = clock
        self._deadline: float | None = None
        self._refused: StopReason | None = None
        self._refused_by: str | None = None
        self._refused_cap: OuterCap | None = None
        self._by: dict[str, list[int]] = {}
        self._tools_by: dict[str, int] = {}
        self._calls = self._input = self._output = 0
        self._held_calls = self._held_tokens = 0
        self._freed: asyncio.Event | None = None
        self._cache_ahead = False
        self.restore(start or UsageTotals())

    def answers_from_cache(self) -> None:
        """The run's models answer from the answer cache, whose answers need no budget: a
        cycle starts even once usage has reached a limit (`stop_before_cycle`), and the run
        stops at the end of a cycle in which a call was refused."""
        self._cache_ahead = True

    def stop_before_cycle(self) -> StopReason | None:
        """The budget stop reason before a cycle with candidates starts: usage has reached a
        limit (None with an answer cache ahead of the models, see `answers_from_cache`)."""
        return None if self._cache_ahead else self.exhausted(reached=True)

    def begin(self, started: float) -> None:
        """Start a run at clock time `started`: the deadline is `started + max_wall_s`."""
        limit = self._budget.max_wall_s
        self._deadline = None if limit is None or self._clock is None else started + limit
        self._refused = None
        self._refused_by = None
        self._refused_cap = None
        self._by = {}
        self._tools_by = {}

    def record(
        self, *, model_calls: int = 1, input_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        """Add one model call's (or several calls') usage, counted for the current `SPENDER`."""
        self._calls += model_calls
        self._input += input_tokens
        self._output += output_tokens
        self._spend(model_calls, input_tokens, output_tokens)

    def _spend(self, calls: int, tokens_in: int, tokens_out: int) -> None:
        name = SPENDER.get()
        if name is not None:
            row = self._by.get(name)
            if row is None:
                row = self._by[name] = [0, 0, 0]
            row[0] += calls
            row[1] += tokens_in
            row[2] += tokens_out

    def count_tool_call(self) -> None:
        """One MCP tool call made, for the current `SPENDER` (the run's tools count them
        against `max_tool_calls`; the meter keeps who made them for the stop's note)."""
        name = SPENDER.get()
        if name is not None:
            self._tools_by[name] = self._tools_by.get(name, 0) + 1

    def refuse_tool_call(self) -> None:
        """`max_tool_calls` refused a call: the run stops after the cycle
        (`tool_call_budget_exhausted`)."""
        self._refuse(StopReason.TOOL_CALL_BUDGET_EXHAUSTED)

    def tool_calls_by(self) -> Mapping[str, int]:
        """Suggestor name -> the MCP tool calls it made since `begin`."""
        return dict(self._tools_by)

    def spent_by(self) -> Mapping[str, UsageTotals]:
        """Suggestor name -> what it spent since `begin` (calls, attempts and tokens).

        A resumed run restores the totals but not this breakdown: the totals may
        exceed its sum by what earlier runs spent.
        """
        return {name: UsageTotals(*row) for name, row in self._by.items()}

    @property
    def refused_by(self) -> str | None:
        """The suggestor whose call or attempt was refused first (None: none, or not in one)."""
        return self._refused_by

    @property
    def refused_cap(self) -> OuterCap | None:
        """The cap beyond the run's budget that made the first refusal (None: the run's own)."""
        return self._refused_cap

    @property
    def totals(self) -> UsageTotals:
        return UsageTotals(self._calls, self._input, self._output)

    @property
    def refused(self) -> StopReason | None:
        """Why the first refused `can_call()` of this run said no (None: nothing refused)."""
        return self._refused

    @property
    def deadline(self) -> float | None:
        """The run's deadline on the meter's clock (None: no time budget or no clock)."""
        return self._deadline

    def reserve(
        self, tokens_estimate: int = 0, answer_cap: int | None = None
    ) -> Reservation | None:
        """Hold one model call, `tokens_estimate` input tokens and the answer's cap, or
        None when a limit forbids it.

        Outstanding reservations count as calls (and their estimates and caps as
        tokens), so concurrent callers never pass `max_model_calls` or
        `max_tokens`. The reservation's `max_tokens` is `answer_cap` bounded by
        what remains of the token budget (`answer_room`). A refusal is
        remembered (see `refused`).
        """
        reason, cap = self._grant(tokens_estimate, answer_cap)
        if reason is not None:
            self._refuse(reason)
            return None
        return self._hold(tokens_estimate, cap)

    def _grant(
        self, tokens_estimate: int, answer_cap: int | None
    ) -> tuple[StopReason | None, int | None]:
        """The limit that refuses the call, else None and the answer cap it gets."""
        reason = self._blocked(extra_calls=1)
        if reason is not None:
            return reason, None
        taken = self._input + self._output + self._held_tokens
        fits, cap = answer_room(self._budget.max_tokens, taken, tokens_estimate, answer_cap)
        return (None, cap) if fits else (StopReason.TOKEN_BUDGET_EXHAUSTED, None)

    def _hold(self, tokens_estimate: int, cap: int | None) -> Reservation:
        held = max(0, tokens_estimate) + (cap or 0)
        self._held_calls += 1
        self._held_tokens += held
        return Reservation(self, held, cap)

    async def reserve_call(
        self, tokens_estimate: int = 0, answer_cap: int | None = None
    ) -> Reservation | None:
        """`reserve`, waiting while the token budget is short only by what calls in flight
        hold (they may settle for less than their caps); None when a limit forbids the call."""
        while True:
            reason, cap = self._grant(tokens_estimate, answer_cap)
            if reason is None:
                return self._hold(tokens_estimate, cap)
            if reason is not StopReason.TOKEN_BUDGET_EXHAUSTED or not await self._wait_freed():
                self._refuse(reason)
                return None

    async def _wait_freed(self) -> bool:
        """Wait until a held reservation is settled or released; False when none is held."""
        if self._held_tokens <= 0:
            return False
        if self._freed is None:
            self._freed = asyncio.Event()
        await self._freed.wait()
        return True

    def _freed_now(self) -> None:
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def allow_attempt(self) -> bool:
        """The attempt gate: consume one call for a further attempt of a reserved call.

        A provider retry or failover reaches a server again, so it counts as a
        model call; False (remembered in `refused`) when the budget has none left.
        """
        reason = self._blocked(extra_calls=1)
        if reason is not None:
            self._refuse(reason)
            return False
        self._calls += 1
        self._spend(1, 0, 0)
        return True

    def note_budget_refusal(self) -> StopReason:
        """A model refused an attempt for the run's budget: the reason to stop with.

        The remembered refusal if there is one (the attempt gate said no), else
        the time budget (the deadline left no room for the retry).
        """
        self._refuse(StopReason.TIME_BUDGET_EXHAUSTED)
        assert self._refused is not None
        return self._refused

    def can_call(self) -> bool:
        """False once the model-call or token budget is reached (counting outstanding
        reservations) or the deadline has passed.

        A refusal is remembered (see `refused`).
        """
        reason = self.limit_reached()
        if reason is not None:
            self._refuse(reason)
        return reason is None

    def limit_reached(self) -> StopReason | None:
        """The limit that forbids another model call now (calls, tokens, then time), or None.

        Outstanding reservations count as made.
        """
        return self._blocked(extra_calls=1)

    def _blocked(self, *, extra_calls: int) -> StopReason | None:
        """The limit that forbids `extra_calls` more calls beside the held ones, or None."""
        budget = self._budget
        calls = self._calls + self._held_calls + extra_calls
        if budget.max_model_calls is not None and calls > budget.max_model_calls:
            return StopReason.MODEL_CALL_BUDGET_EXHAUSTED
        tokens = self._input + self._output + self._held_tokens
        if budget.max_tokens is not None and tokens >= budget.max_tokens:
            return StopReason.TOKEN_BUDGET_EXHAUSTED
        deadline, clock = self._deadline, self._clock
        if deadline is not None and clock is not None and clock.monotonic() >= deadline:
            return StopReason.TIME_BUDGET_EXHAUSTED
        return None

    def _refuse(self, reason: StopReason, cap: OuterCap | None = None) -> None:
        if self._refused is None:
            self._refused = reason
            self._refused_by = SPENDER.get()
            self._refused_cap = cap

    def _unhold(self, tokens: int) -> None:
        self._held_calls -= 1
        self._held_tokens -= tokens
        self._freed_now()

    def _settle(self, held_tokens: int, tokens_in: int, tokens_out: int) -> None:
        """A reserved call was made: it stops being held and counts as spent.

        One step for a meter that shares its counts (the batch's `PooledMeter`
        overrides it so that no other case sees the call free in between).
        """
        self._unhold(held_tokens)
        self.record(model_calls=1, input_tokens=tokens_in, output_tokens=tokens_out)

    def exhausted(self, *, reached: bool) -> StopReason | None:
        """The budget stop reason if usage has reached (`reached=True`) or gone over a limit."""
        budget = self._budget
        calls, tokens = self._calls, self._input + self._output
        if budget.max_model_calls is not None and (
            calls >= budget.max_model_calls if reached else calls > budget.max_model_calls
        ):
            return StopReason.MODEL_CALL_BUDGET_EXHAUSTED
        if budget.max_tokens is not None and (
            tokens >= budget.max_tokens if reached else tokens > budget.max_tokens
        ):
            return StopReason.TOKEN_BUDGET_EXHAUSTED
        return None

    def restore(self, totals: UsageTotals) -> None:
        """Set the counts to `totals` (a resumed run continues from its checkpoint's usage)."""
        self._calls = totals.model_calls
        self._input = totals.input_tokens
        self._output = totals.output_tokens
