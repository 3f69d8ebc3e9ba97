from __future__ import annotations

import asyncio

from converge_dsl.clock import FakeClock
from converge_dsl.engine import (
    ENGINE_EVENT_ADAPTER,
    Engine,
    PromotionPolicy,
    ReactOnceSuggestor,
    RunFinished,
    SeedSuggestor,
    deterministic_dump,
)


def _run(start: float) -> tuple[object, ...]:
    engine = Engine(clock=FakeClock(start), policy=PromotionPolicy(min_confidence=0.9))
    engine.register(SeedSuggestor("seed", [("a", "alpha")]))
    engine.register(ReactOnceSuggestor())  # 0.8 < 0.9: rejected, so proposal_rejected appears
    return asyncio.run(engine.run()).events


def test_events_parse_back_through_the_discriminated_union() -> None:
    events = _run(0.0)
    types = {e.type for e in events}  # type: ignore[attr-defined]
    assert {"proposal_rejected", "fact_promoted", "run_finished"} <= types
    for event in events:
        data = event.model_dump(mode="json")  # type: ignore[attr-defined]
        assert ENGINE_EVENT_ADAPTER.validate_python(data) == event


def test_only_timing_differs_between_runs_with_different_clocks() -> None:
    first, second = _run(0.0), _run(1000.0)
    assert [deterministic_dump(e) for e in first] == [deterministic_dump(e) for e in second]  # type: ignore[arg-type]
    assert first != second
    last = first[-1]
    assert isinstance(last, RunFinished)
    assert last.stop_reason == "converged"
    assert "timing" not in deterministic_dump(last)
