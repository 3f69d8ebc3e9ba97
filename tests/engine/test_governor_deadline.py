"""The run's deadline reaches every governed computation, and stops the run as the deadline."""

from __future__ import annotations

import asyncio

from converge_dsl.clock import FakeClock
from converge_dsl.engine import Budget, Engine, StopReason
from converge_dsl.engine.budget import DEFAULT_MAX_WALL_S
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.engine.types import ContextView
from converge_dsl.sandbox._templating import GLOBALS, compile_expression, evaluate

BURNER = compile_expression("(range(1000) | list | map('abs') | list) != []")


def test_an_expression_past_the_deadline_stops_the_run_with_the_time_budget() -> None:
    clock = FakeClock()

    def accepts(ctx: ContextView) -> bool:
        clock.advance(30)  # the expression starts past the run's deadline
        return bool(evaluate(BURNER, dict(GLOBALS)))

    engine = Engine(budget=Budget(max_wall_s=10), clock=clock)
    engine.register(FnSuggestor("late", [], lambda ctx: [], accepts=accepts))
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert not any(f.id.startswith("error:") for f in result.context.get("diagnostic"))


def test_a_run_has_a_default_wall_clock_limit() -> None:
    assert DEFAULT_MAX_WALL_S == 600.0
    assert Budget().max_wall_s == DEFAULT_MAX_WALL_S
    clock = FakeClock()

    def accepts(ctx: ContextView) -> bool:
        clock.advance(DEFAULT_MAX_WALL_S + 1)  # a budget that names no limit still has one
        return bool(evaluate(BURNER, dict(GLOBALS)))

    engine = Engine(budget=Budget(max_cycles=10), clock=clock)
    engine.register(FnSuggestor("slow", [], lambda ctx: [], accepts=accepts))
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
