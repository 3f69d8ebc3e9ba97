"""Interned context keys: one object per key name, shared by proposals and facts."""

from __future__ import annotations

import copy
import pickle

import pytest

from converge_dsl.engine import ContextKey, ProposedFact
from converge_dsl.engine import types as engine_types


def test_a_key_name_gives_one_shared_object() -> None:
    first, second = ContextKey("findings"), ContextKey("find" + "ings")
    assert first is second
    assert ContextKey(first) is first
    assert first == "findings"
    assert hash(first) == hash("findings")


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
