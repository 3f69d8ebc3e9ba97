"""A function-backed suggestor for tests, benchmarks and docs (a public fake).

`FnSuggestor(name, dependencies, propose)` proposes whatever `propose(ctx)`
returns. By default it is idempotent: it accepts only while one of the
proposals it would make is neither a fact nor rejected yet, so a set of
them reaches a fixed point. `delay` awaits the given clock first (to shuffle
finishing order, see `StepClock`); `fail` raises instead of proposing.
`SyncFnSuggestor` is the same without `delay`, a synchronous suggestor
(`SyncSuggestor`) the engine runs inline.
`TickClock` is a fake clock that moves on every reading (time passes as work is done).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

from converge_dsl._fact_ids import shown_id
from converge_dsl.clock import Clock, FakeClock, SystemClock
from converge_dsl.engine.reference import SuggestorBase
from converge_dsl.engine.types import AgentEffect, ContextView, ProposedFact, Provenance

Propose = Callable[[ContextView], Iterable[ProposedFact]]


class StepClock(FakeClock):
    """A fake clock on which sleeping N "seconds" yields to the event loop N times.

    Suggestors with different delays on it finish in a different order than
    they started, deterministically and without waiting.
    """

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        for _ in range(int(seconds)):
            await asyncio.sleep(0)


class TickClock(FakeClock):
    """A fake clock that advances `step` seconds every time it is read."""

    def __init__(self, step: float = 1.0, start: float = 0.0) -> None:
        super().__init__(start)
        self.step = step

    def monotonic(self) -> float:
        now = super().monotonic()
        self.advance(self.step)
        return now


def _missing(ctx: ContextView, proposals: Iterable[ProposedFact]) -> bool:
    return any(
        ctx.fact(p.key, p.id) is None
        and ctx.fact("diagnostic", f"validation:rejected:{shown_id(p.id)}") is None
        for p in proposals
    )


class FnSuggestor(SuggestorBase):
    """A suggestor whose proposals come from a function of the context."""

    def __init__(
        self,
        name: str,
        dependencies: Sequence[str],
        propose: Propose,
        *,
        accepts: Callable[[ContextView], bool] | None = None,
        delay: float = 0.0,
        clock: Clock | None = None,
        fail: BaseException | None = None,
        provenance: Provenance | None = None,
    ) -> None:
        self.name = name
        self.dependencies = tuple(dependencies)
        self._propose = propose
        self._accepts = accepts
        self._delay = delay
        self._clock = clock or SystemClock()
        self._fail = fail
        self._provenance = provenance if provenance is not None else Provenance(name)
        self.calls = 0

    def accepts(self, ctx: ContextView) -> bool:
        if self._accepts is not None:
            return self._accepts(ctx)
        return self._fail is not None or _missing(ctx, self._propose(ctx))

    async def execute(self, ctx: ContextView) -> AgentEffect:
        self.calls += 1
        if self._delay:
            await self._clock.sleep(self._delay)
        if self._fail is not None:
            raise self._fail
        return AgentEffect(tuple(self._propose(ctx)))

    def provenance(self) -> Provenance:
        return self._provenance


class SyncFnSuggestor(FnSuggestor):
    """A synchronous `FnSuggestor` (no delay): the engine calls `propose` inline."""

    synchronous = True

    def propose(self, ctx: ContextView) -> AgentEffect:
        self.calls += 1
        if self._fail is not None:
            raise self._fail
        return AgentEffect(tuple(self._propose(ctx)))
