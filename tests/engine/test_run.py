"""How a run executes a cycle's suggestors on the event loop (`converge_dsl.engine._run`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine, Generator
from typing import Any

import pytest

from converge_dsl.engine import (
    AgentEffect,
    Budget,
    ContextView,
    Engine,
    ProposedFact,
    Provenance,
    StopReason,
    SuggestorBase,
)
from converge_dsl.engine.state import RunResult


class Waits(SuggestorBase):
    """Proposes one signal after sleeping `seconds` on the event loop."""

    def __init__(self, name: str, seconds: float) -> None:
        self.name = name
        self._seconds = seconds

    async def execute(self, ctx: ContextView) -> AgentEffect:
        await asyncio.sleep(self._seconds)
        proposal = ProposedFact("signals", self.name, "done", 1.0, Provenance(self.name))
        return AgentEffect.of([proposal])


def _counting(engine: Engine) -> tuple[RunResult, list[str]]:
    """The run's result and the coroutine names of every task it created."""
    made: list[str] = []

    def factory(
        loop: asyncio.AbstractEventLoop, coro: Generator[Any, None, Any] | Coroutine[Any, Any, Any]
    ) -> asyncio.Future[Any]:
        made.append(getattr(coro, "__qualname__", type(coro).__name__))
        return asyncio.Task(coro, loop=loop)

    async def main() -> RunResult:
        asyncio.get_running_loop().set_task_factory(factory)
        return await engine.run()

    return asyncio.run(main()), made


def test_the_deadline_is_a_timer_not_a_task() -> None:
    engine = Engine(budget=Budget(max_wall_s=60))
    engine.register(Waits("a", 0))
    engine.register(Waits("b", 0))
    result, made = _counting(engine)
    assert result.stop_reason is StopReason.CONVERGED
    # One task per suggestor and cycle; nothing else of the run waits for the deadline.
    ours = [name for name in made if name.startswith("Run.")]
    assert ours == ["Run._gather.<locals>.one"] * 2 * result.cycles


def test_the_deadline_cancels_the_suggestors_in_flight() -> None:
    engine = Engine(budget=Budget(max_wall_s=0.05))
    engine.register(Waits("slow", 3600))
    started = time.monotonic()
    result = asyncio.run(engine.run())
    assert time.monotonic() - started < 30
    assert result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert len(result.context) == 0


def test_a_cycle_finished_before_its_deadline_leaves_no_timer_behind() -> None:
    engine = Engine(budget=Budget(max_wall_s=60))
    engine.register(Waits("a", 0))

    async def main() -> list[asyncio.TimerHandle]:
        await engine.run()
        loop = asyncio.get_running_loop()
        return [h for h in getattr(loop, "_scheduled", []) if not h.cancelled()]

    assert asyncio.run(main()) == []


class Stubborn(SuggestorBase):
    """Swallows its cancellation and proposes anyway."""

    name = "stubborn"

    async def execute(self, ctx: ContextView) -> AgentEffect:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        proposal = ProposedFact("signals", "late", "done", 1.0, Provenance(self.name))
        return AgentEffect.of([proposal])


def test_a_lone_suggestor_is_awaited_without_a_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("gathered")

    engine = Engine(budget=Budget(max_wall_s=60))
    engine.register(Waits("a", 0))
    monkeypatch.setattr(asyncio, "gather", refused)
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.CONVERGED
    assert [fact.id for fact in result.context] == ["a"]


@pytest.mark.parametrize("alone", [True, False])
def test_a_suggestor_that_swallows_the_deadline_is_cancelled_all_the_same(alone: bool) -> None:
    engine = Engine(budget=Budget(max_wall_s=0.05))
    engine.register(Stubborn())
    if not alone:
        engine.register(Waits("quick", 0))
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert len(result.context) == 0  # nothing merged from the cycle the deadline cut


def test_cancel_stops_a_lone_suggestor_that_swallows_it() -> None:
    engine = Engine()

    async def main() -> RunResult:
        task = asyncio.create_task(engine.run())
        await asyncio.sleep(0.01)
        engine.cancel()
        return await task

    engine.register(Stubborn())
    result = asyncio.run(main())
    assert result.stop_reason is StopReason.CANCELLED
    assert len(result.context) == 0


class CancelsItself(SuggestorBase):
    """Times out a slow call of its own the way a library without `uncancel()` does
    (`current_task().cancel()`, caught), then proposes its fallback."""

    name = "own_timeout"

    async def execute(self, ctx: ContextView) -> AgentEffect:
        task = asyncio.current_task()
        assert task is not None
        timer = asyncio.get_running_loop().call_later(0.01, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        timer.cancel()
        proposal = ProposedFact("signals", "fallback", "done", 1.0, Provenance(self.name))
        return AgentEffect.of([proposal])


@pytest.mark.parametrize("alone", [True, False])
def test_a_suggestor_that_cancels_itself_and_goes_on_is_not_the_run_cancelled(
    alone: bool,
) -> None:
    engine = Engine(budget=Budget(max_wall_s=60))
    engine.register(CancelsItself())
    if not alone:
        engine.register(Waits("quick", 0))
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.CONVERGED
    assert "fallback" in [fact.id for fact in result.context]


@pytest.mark.parametrize("alone", [True, False])
def test_a_run_whose_caller_cancels_it_is_cancelled_though_its_suggestor_goes_on(
    alone: bool,
) -> None:
    engine = Engine()
    engine.register(Stubborn())
    if not alone:
        engine.register(Waits("quick", 0))

    async def main() -> None:
        task = asyncio.create_task(engine.run())
        await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
