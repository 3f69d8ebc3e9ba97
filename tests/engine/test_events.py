from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from converge_dsl.clock import FakeClock
from converge_dsl.engine import (
    ENGINE_EVENT_ADAPTER,
    CycleStarted,
    Engine,
    PromotionPolicy,
    ReactOnceSuggestor,
    RunFinished,
    SeedSuggestor,
    deterministic_dump,
)
from converge_dsl.engine.events import from_fields


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


def test_an_event_from_its_fields_is_the_model_its_keywords_make() -> None:
    """`from_fields` (how the engine builds its events): for each event of a run, the same
    model, fields set and JSON as the keyword call on the fields it was given."""
    for event in _run(0.0):
        kind = type(event)
        fields = {name: getattr(event, name) for name in event.model_fields_set}  # type: ignore[attr-defined]
        made = from_fields(kind, fields)
        by_keywords = kind(**fields)
        assert type(made) is kind
        assert made == by_keywords == event
        assert made.model_fields_set == by_keywords.model_fields_set
        assert made.model_dump_json() == by_keywords.model_dump_json()


def test_an_event_from_fields_of_the_wrong_type_is_refused() -> None:
    fields: dict[str, object] = {"cycle": "one", "dirty_keys": (), "candidates": ()}
    with pytest.raises(ValidationError):
        from_fields(CycleStarted, fields)
    with pytest.raises(ValidationError):
        CycleStarted(**fields)  # type: ignore[arg-type]
    # Coerced alike: a whole float is an int, a list a tuple.
    made = from_fields(CycleStarted, {"cycle": 2.0, "dirty_keys": ["a"], "candidates": ()})
    assert made == CycleStarted(cycle=2, dirty_keys=("a",), candidates=())
