"""EngineState serialisation and the checkpoint/resume law."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from converge_dsl.engine import (
    Engine,
    EngineState,
    ProposedFact,
    Provenance,
    ReactOnceSuggestor,
    SeedSuggestor,
    types,
)
from converge_dsl.engine.state import fact_to_data
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.errors import ConvergeError


def P(key: str, fid: str, content: object = "c") -> ProposedFact:
    return ProposedFact(key, fid, content, 0.9, Provenance("s", model_id="m", account="a"))  # type: ignore[arg-type]


def _engine() -> Engine:
    engine = Engine()
    engine.register(
        SeedSuggestor(
            "seed",
            [
                ("a", "alpha"),
                ("b", {"name": "beta", "tags": ["x", 1, 2.5, None]}),  # legacy: becomes data
                ("c", "gamma", {"deep": {"xs": [1, 2.5, None, True]}, "n": 0}),
            ],
        )
    )
    engine.register(ReactOnceSuggestor())
    engine.register(
        FnSuggestor(
            "chain",
            ["hypotheses", "strategies"],
            lambda ctx: (
                [
                    P(
                        "strategies",
                        f"st{ctx.count('strategies') + 1}",
                        {"n": ctx.count("strategies")},
                    )
                ]
                if ctx.count("strategies") < 4
                else []
            ),
        )
    )
    engine.register(
        FnSuggestor(
            "low",
            ["strategies"],
            lambda ctx: [ProposedFact("votes", "v", "x", 0.1, Provenance("low"))],
        )
    )
    return engine


def test_state_json_round_trips_exactly() -> None:
    states: list[EngineState] = []
    asyncio.run(_engine().run(on_cycle_end=states.append))
    assert states
    for state in states:
        text = state.to_json()
        again = EngineState.from_json(text)
        assert again == state
        assert again.to_json() == text
    last = EngineState.from_json(states[-1].to_json())
    data = {f.id: f.data for f in last.facts if f.key == "seeds"}
    assert data == {
        "a": None,
        "b": {"name": "beta", "tags": ("x", 1, 2.5, None)},
        "c": {"deep": {"xs": (1, 2.5, None, True)}, "n": 0},
    }


def test_a_restored_state_shares_the_promotion_records_of_facts_promoted_alike() -> None:
    states: list[EngineState] = []
    asyncio.run(_engine().run(on_cycle_end=states.append))
    again = EngineState.from_json(states[-1].to_json())
    seeds = [f for f in again.facts if f.key == "seeds"]
    assert len(seeds) > 1
    assert len({id(f._basis) for f in seeds}) == 1
    assert [f.promotion.logical_time for f in seeds] == [
        f.promotion.logical_time for f in states[-1].facts if f.key == "seeds"
    ]


def test_a_checkpoint_written_when_content_could_be_json_loads_it_as_data() -> None:
    state = asyncio.run(Engine().run()).state
    old = state.to_data()
    fact = {
        "key": "seeds",
        "id": "old",
        "content": {"b": 1, "a": [True]},
        "confidence": 1.0,
        "provenance": {"source": "seed"},
        "promotion": {
            "gate": "seed",
            "approver": "pipeline",
            "cycle": 0,
            "evidence": [],
            "logical_time": 1,
        },
    }
    loaded = EngineState.from_json(json.dumps({**old, "facts": [fact]}))
    (only,) = loaded.facts
    assert (only.content, only.data) == ('{"a":[true],"b":1}', {"b": 1, "a": (True,)})


def test_resuming_from_any_cycle_reaches_the_same_result() -> None:
    states: list[EngineState] = []
    reference = asyncio.run(_engine().run(on_cycle_end=states.append))
    assert reference.converged
    assert len(states) == reference.cycles - 1
    for state in states:
        resumed = asyncio.run(_engine().run(resume_from=EngineState.from_json(state.to_json())))
        assert resumed.canonical_json() == reference.canonical_json()


@pytest.mark.parametrize(
    "text", ["{", "[]", '{"format": "other"}', '{"format": "converge-dsl/engine-state/v1"}']
)
def test_malformed_state_is_a_converge_error(text: str) -> None:
    with pytest.raises(ConvergeError):
        EngineState.from_json(text)


def test_a_facts_data_reads_its_shared_promotion_record_without_building_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`fact_to_data` gives each fact's own promotion (its own logical time) from the record
    it shares with the facts promoted alike: `Fact.promotion` would build one to read."""
    facts = asyncio.run(_engine().run()).state.facts
    seeds = [f for f in facts if f.key == "seeds"]
    assert len({id(f._basis) for f in seeds}) == 1
    assert len({f.logical_time for f in seeds}) == len(seeds) > 1
    expected = [dataclasses.asdict(f.promotion) for f in facts]
    for item in expected:
        item["evidence"] = list(item["evidence"])

    def refused(*args: object) -> None:
        raise AssertionError("a promotion record built")

    monkeypatch.setattr(types, "PromotionRecord", refused)
    assert [fact_to_data(f)["promotion"] for f in facts] == expected
