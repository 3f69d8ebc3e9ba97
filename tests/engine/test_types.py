"""Interned context keys (one object per name) and compact facts (shared promotion records)."""

from __future__ import annotations

import copy
import pickle

import pytest

from converge_dsl.engine import (
    ContextKey,
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
    freeze_json,
)
from converge_dsl.engine import types as engine_types


@pytest.fixture
def room_to_intern(monkeypatch: pytest.MonkeyPatch) -> None:
    """An intern table with room: tests run earlier in the same process (property
    tests' random key names) may have filled the shared one to its bound."""
    monkeypatch.setattr(engine_types, "_INTERNED", dict(engine_types._INTERNED))
    monkeypatch.setattr(
        engine_types, "_MAX_INTERNED", len(engine_types._INTERNED) + engine_types._MAX_INTERNED
    )


@pytest.mark.usefixtures("room_to_intern")
def test_a_key_name_gives_one_shared_object() -> None:
    first, second = ContextKey("findings"), ContextKey("find" + "ings")
    assert first is second
    assert ContextKey(first) is first
    assert first == "findings"
    assert hash(first) == hash("findings")


@pytest.mark.usefixtures("room_to_intern")
def test_proposals_share_the_key_object_of_their_name() -> None:
    proposals = [ProposedFact("find" + "ings", f"p{i}", "x") for i in range(100)]
    assert len({id(p.key) for p in proposals}) == 1
    assert type(proposals[0].key) is ContextKey
    assert proposals[0].key is ContextKey("findings")


def test_interned_keys_survive_pickling_and_copies_as_the_same_object() -> None:
    key = ContextKey("signals")
    assert pickle.loads(pickle.dumps(key)) is key
    assert copy.copy(key) is key
    assert copy.deepcopy(key) is key
    assert key.is_builtin
    assert key.sort_key() == (4, "signals")


def test_the_intern_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_types, "_INTERNED", {})
    monkeypatch.setattr(engine_types, "_MAX_INTERNED", 3)
    made = [ContextKey(f"name-{i}") for i in range(10)]
    assert len(engine_types._INTERNED) == 3
    assert ContextKey("name-0") is made[0]  # interned before the table filled
    later = ContextKey("name-9")
    assert later == made[9]
    assert later is not made[9]
    assert type(later) is ContextKey


# -- compact facts ---------------------------------------------------------------------


def _record(time: int) -> PromotionRecord:
    return PromotionRecord("auto", "engine", 2, ("suggestor:w",), "cycle/2/w", time)


def test_a_fact_reads_compares_hashes_and_pickles_as_the_dataclass_it_was() -> None:
    fact = Fact("signals", "s1", "x", Provenance("w"), 0.9, _record(7), freeze_json({"a": [1]}))
    same = Fact("signals", "s1", "x", Provenance("w"), 0.9, _record(7), freeze_json({"a": [1]}))
    assert fact.promotion == _record(7)
    assert fact.logical_time == 7
    assert fact == same
    assert hash(fact) == hash(same)
    assert fact != Fact("signals", "s1", "x", Provenance("w"), 0.9, _record(8), {"a": [1]})
    plain = Fact("signals", "s2", "x", Provenance("w"), 0.9, _record(7))  # frozen data: no pickle
    assert pickle.loads(pickle.dumps(plain)) == plain
    assert copy.deepcopy(plain) == plain
    assert repr(fact).startswith("Fact(key='signals', id='s1', content='x', provenance=")
    match fact:
        case Fact(key, fact_id, promotion=record):
            assert (key, fact_id, record.logical_time) == ("signals", "s1", 7)


def test_a_fact_refuses_assignment() -> None:
    fact = Fact("signals", "s1", "x", Provenance("w"), 0.9, _record(1))
    with pytest.raises(AttributeError, match="immutable"):
        fact.content = "changed"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del fact.content  # type: ignore[misc]


def test_facts_promoted_alike_share_one_record_and_keep_their_own_times() -> None:
    basis = _record(0)
    proposals = [ProposedFact("signals", f"s{i}", "x", 1.0, Provenance("w")) for i in range(3)]
    facts = [Fact.promoted(p, basis, time) for time, p in enumerate(proposals, start=5)]
    assert {id(f._basis) for f in facts} == {id(basis)}
    assert [f.promotion.logical_time for f in facts] == [5, 6, 7]
    assert facts[1].promotion == _record(6)
    assert facts[0] == Fact("signals", "s0", "x", Provenance("w"), 1.0, _record(5))


def test_an_engine_run_shares_promotion_records_per_suggestor_and_cycle() -> None:
    import asyncio

    from converge_dsl.engine import Budget, ContextView, Engine
    from converge_dsl.engine.testing import FnSuggestor

    def propose(ctx: ContextView) -> list[ProposedFact]:
        return [
            ProposedFact("signals", f"c{ctx.cycle}-{i}", "x", 1.0, Provenance("w"))
            for i in range(50)
        ]

    engine = Engine(budget=Budget(max_cycles=5), record_events=False)
    engine.register(FnSuggestor("w", [], propose, accepts=lambda ctx: ctx.cycle <= 3))
    result = asyncio.run(engine.run())
    facts = result.context.get("signals")
    assert len(facts) == 150
    assert len({id(f._basis) for f in facts}) == 3  # one per cycle
    assert [f.promotion.logical_time for f in facts] == list(range(1, 151))
    assert {f.promotion.trace_link for f in facts} == {"cycle/1/w", "cycle/2/w", "cycle/3/w"}


def test_a_frozen_objects_canonical_text_is_made_once_and_kept() -> None:
    data = freeze_json({"b": [1, 2.5, {"y": None, "x": True}], "a": "été\n"})
    text = engine_types.canonical_json(data)
    assert text == '{"a":"été\\n","b":[1,2.5,{"x":true,"y":null}]}'
    assert engine_types.canonical_json(data) is text
    assert hash(data) == hash(text)
    for copied in (copy.copy(data), copy.deepcopy(data), pickle.loads(pickle.dumps(data))):
        assert type(copied) is engine_types.FrozenDict
        assert engine_types.canonical_json(copied) == text


def test_canonical_json_keeps_no_text_of_what_is_not_json() -> None:
    data = engine_types.FrozenDict({"when": object()})
    for _ in range(2):
        with pytest.raises(TypeError, match="not JSON serializable"):
            engine_types.canonical_json(data)
    assert engine_types.canonical_json([1, "x"]) == '[1,"x"]'
