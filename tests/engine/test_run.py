"""How a run executes a cycle's suggestors on the event loop (`converge_dsl.engine._run`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Generator
from typing import Any

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
