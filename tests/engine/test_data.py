"""Fact data at the gate: JSON only, counted against the size limit, checked against key schemas."""

from __future__ import annotations

import asyncio
import copy
import pickle
import urllib.request
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl import codes
from converge_dsl.clock import FakeClock
from converge_dsl.engine import (
    Engine,
    PromotionGate,
    PromotionPolicy,
    ProposedFact,
    Provenance,
    SeedSuggestor,
    StopReason,
    freeze_json,
)
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.errors import RunError
from converge_dsl.sandbox import _safe_schema as safe_schema
from converge_dsl.sandbox import python_validator, run_deadline
from converge_dsl.sandbox._governor import _POOLS
from converge_dsl.sandbox._safe_schema import SCHEMA_RUN_STEPS
from converge_dsl.sandbox._schema_quick import QuickCheck

TICKET = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "bug"]},
        "urgency": {"type": "integer", "minimum": 1, "maximum": 3},
        "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
    },
    "required": ["category"],
    "$defs": {"tag": {"type": "string", "maxLength": 5}},
}


def _p(content: str = "text", data: Any = None, key: str = "signals") -> ProposedFact:
    return ProposedFact(key, "x", content, 1.0, Provenance("s"), data)


def _gate(**policy: Any) -> PromotionGate:
    return PromotionGate(PromotionPolicy(**policy))


# -- the fact model ---------------------------------------------------------------------


def test_content_is_text_and_a_legacy_object_content_becomes_data() -> None:
    legacy = ProposedFact("signals", "x", {"b": [1, 2], "a": None})  # type: ignore[arg-type]
    assert legacy.content == '{"a":null,"b":[1,2]}'
    assert legacy.data == {"b": (1, 2), "a": None}
    both = ProposedFact("signals", "x", {"a": 1}, data={"kept": True})  # type: ignore[arg-type]
    assert (both.content, both.data) == ('{"a":1}', {"kept": True})
    plain = ProposedFact("signals", "x", "text", data=[{"a": 1}])
    assert plain.data == ({"a": 1},)
    with pytest.raises(TypeError, match="immutable"):
        plain.data[0]["a"] = 2


# -- JSON only, and size ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ({"a": [1, float("nan")]}, "data at /a/1: nan is not a JSON number (data must be JSON)"),
        (float("inf"), "data: inf is not a JSON number (data must be JSON)"),
        ({"a": {1: "x"}}, "data at /a: the key 1 is not a string (data must be JSON)"),
        ({"a/b": {"c~": {2}}}, "data at /a~1b/c~0: a set is not a JSON value (data must be JSON)"),
    ],
)
def test_data_that_is_not_json_is_rejected_with_its_pointer(data: Any, reason: str) -> None:
    assert _gate().rejection(_p(data=data)) == reason


def test_size_counts_content_plus_the_canonical_json_of_data() -> None:
    gate = _gate(max_content_length=20)
    assert gate.rejection(_p("1234", {"k": "x" * 8})) is None  # 4 + 16 characters
    assert gate.rejection(_p("12345", {"k": "x" * 8})) == (
        "content and data are 21 characters; max_content_length is 20"
    )


def test_blank_content_passes_when_there_is_data() -> None:
    assert _gate().rejection(_p("", {"a": 1})) is None
    assert _gate().rejection(_p("  ")) == "blank content"


def test_forbidden_terms_are_looked_for_in_data_too() -> None:
    gate = _gate(forbidden_terms=("Guaranteed",))
    assert gate.rejection(_p("fine", {"claim": "GUARANTEED win"})) == (
        "data contains forbidden term 'Guaranteed'"
    )


# -- key schemas --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            {"category": "refund"},
            "data at /category: 'refund' is not one of ['billing', 'bug'] (enum)",
        ),
        (
            {"category": "bug", "urgency": "2"},
            "data at /urgency: '2' is not of type 'integer' (type)",
        ),
        (
            {"category": "bug", "tags": ["ok", "far too long"]},
            "data at /tags/1: 'far too long' is too long (maxLength)",
        ),
        ({}, "data: 'category' is a required property (required)"),
        (None, "data: None is not of type 'object' (type)"),
    ],
)
def test_key_schema_failures_name_the_pointer_and_the_rule(data: Any, reason: str) -> None:
    gate = _gate(key_schemas={"tickets": TICKET})
    assert gate.rejection(_p("t", data, key="tickets")) == reason


def test_data_that_fits_passes_and_other_keys_are_not_checked() -> None:
    gate = _gate(key_schemas={"tickets": TICKET})
    fits = {"category": "billing", "urgency": 2, "tags": ["vip"]}
    assert gate.rejection(_p("t", fits, key="tickets")) is None
    assert gate.rejection(_p("t", {"category": "refund"}, key="signals")) is None


@pytest.mark.parametrize(
    "ref", ["http://example.invalid/ticket.json", "file:///etc/passwd", "other.json#/x"]
)
def test_a_ref_outside_the_schema_is_never_fetched(
    ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the gate tried to fetch a schema")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(RunError) as caught:  # refused before any cycle, never fetched
        _gate(key_schemas={"tickets": {"$ref": ref}})
    assert caught.value.message.startswith("the schema of key 'tickets': at /$ref: $ref")
    assert "points outside the schema" in caught.value.message


def test_an_invalid_key_schema_is_a_run_error_before_any_cycle() -> None:
    with pytest.raises(RunError, match=r"the schema of key 'tickets' is not a valid JSON Schema"):
        Engine(policy=PromotionPolicy(key_schemas={"tickets": {"type": "nonsense"}}))


def test_each_key_schema_is_checked_for_safety_once(schema_safety_checks: list[Any]) -> None:
    checked = schema_safety_checks
    # Texts no test built a validator for, so none is taken from the shared ones.
    fresh = {"type": "object", "description": f"{id(checked)} checked once"}
    Engine(policy=PromotionPolicy(key_schemas={"tickets": fresh}))
    assert checked == [fresh]
    checked.clear()
    unsafe = {"$ref": f"http://example.invalid/{id(checked)}.json", "type": "nonsense"}
    with pytest.raises(RunError, match="points outside the schema"):  # before the meta check
        Engine(policy=PromotionPolicy(key_schemas={"tickets": unsafe}))
    assert checked == [unsafe]


def test_the_policy_freezes_its_schemas_and_stays_hashable() -> None:
    policy = PromotionPolicy(key_schemas={"tickets": TICKET})
    assert hash(policy) == hash(PromotionPolicy(key_schemas={"tickets": dict(TICKET)}))
    assert PromotionPolicy().key_schemas == {}


# -- through the engine --------------------------------------------------------------------


def _run(*proposals: ProposedFact, **policy: Any) -> Any:
    engine = Engine(policy=PromotionPolicy(**policy), declared_keys=("tickets",))
    engine.register(FnSuggestor("triage", [], lambda ctx: list(proposals)))
    return asyncio.run(engine.run())


def test_a_schema_failure_becomes_a_diagnostic_fact_and_is_not_promoted() -> None:
    result = _run(
        ProposedFact(
            "tickets", "t1", "refund please", 1.0, Provenance("triage"), {"category": "refund"}
        ),
        ProposedFact(
            "tickets", "t2", "card declined", 1.0, Provenance("triage"), {"category": "billing"}
        ),
        key_schemas={"tickets": TICKET},
    )
    assert result.stop_reason is StopReason.CONVERGED
    assert [f.id for f in result.context.get("tickets")] == ["t2"]
    assert result.context.fact("tickets", "t2").data == {"category": "billing"}
    (diagnostic,) = result.context.get("diagnostic")
    reason = "data at /category: 'refund' is not one of ['billing', 'bug'] (enum)"
    assert diagnostic.id == "validation:rejected:t1"
    assert diagnostic.content == f"tickets/t1 from triage rejected: {reason}"
    assert diagnostic.data == {
        "key": "tickets",
        "proposal": "t1",
        "suggestor": "triage",
        "reason": reason,
    }


def test_same_id_same_data_is_a_no_op_other_data_is_a_conflict() -> None:
    def fact(data: Any) -> ProposedFact:
        return ProposedFact("signals", "s", "same text", 1.0, Provenance("x"), data)

    engine = Engine()
    engine.register(SeedSuggestor("one", [fact({"n": 1})]))
    engine.register(
        FnSuggestor("two", ["signals"], lambda ctx: [fact({"n": 1})], accepts=lambda c: c.cycle < 3)
    )
    assert asyncio.run(engine.run()).stop_reason is StopReason.CONVERGED

    engine = Engine()
    engine.register(SeedSuggestor("one", [fact({"n": 1})]))
    engine.register(
        FnSuggestor("two", ["signals"], lambda ctx: [fact({"n": 1.0})], accepts=lambda c: True)
    )
    result = asyncio.run(engine.run())
    assert result.stop_reason is StopReason.ERROR
    assert str(result.error.message) == (
        "conflicting fact signals/s: it holds 'same text' with data {\"n\":1} (from x), "
        "the new proposal holds 'same text' with data {\"n\":1.0}"
    )


def test_events_carry_data_when_there_is_some() -> None:
    engine = Engine()
    engine.register(SeedSuggestor("seed", [("a", "alpha", {"k": [1]}), ("b", "beta")]))
    result = asyncio.run(engine.run())
    promoted = {e.id: e for e in result.events if getattr(e, "type", "") == "fact_promoted"}
    assert promoted["a"].data == {"k": (1,)}
    assert promoted["a"].model_dump(mode="json")["data"] == {"k": [1]}
    assert "data" not in promoted["b"].model_dump(mode="json")  # no data, no field


class _Text(str):
    pass


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([4299, 4300, 5000]).map(lambda digits: 10**digits),  # past 4300 digits?
    st.sampled_from([4299, 4300]).map(lambda digits: -(10**digits)),
    st.floats(),  # NaN and the infinities included: not JSON
    st.text(max_size=3),
    st.builds(_Text, st.text(max_size=3)),  # a str subclass: JSON all the same
    st.builds(object),
)
_KEYS = st.one_of(st.text(max_size=3), st.integers(), st.none())
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_KEYS, inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(freeze_json),
    ),
    max_leaves=12,
)


@given(_VALUES)
def test_the_quick_look_at_plain_data_answers_as_the_full_walk(value: Any) -> None:
    from converge_dsl.engine._data import _first_problem, json_problem

    assert json_problem(value) == _first_problem(value)


def test_an_integer_json_readers_refuse_is_named_not_raised() -> None:
    from converge_dsl.engine import (
        PromotionGate,
        PromotionPolicy,
        ProposedFact,
        Provenance,
        json_problem,
    )

    assert json_problem({"n": [10**4300 - 1]}) is None  # 4300 digits: readers take it
    assert json_problem({"n": [1, -(10**4300)]}) == (
        "data at /n/1: an integer of more than 4300 digits (JSON readers refuse it)"
    )
    proposal = ProposedFact("k", "x", "big", data={"n": 10**5000}, provenance=Provenance("p"))
    reason = PromotionGate(PromotionPolicy()).rejection(proposal)
    assert reason == (
        "data at /n: an integer of more than 4300 digits (JSON readers refuse it)"
        " (data must be JSON)"
    )


def test_the_digit_limit_is_the_interpreters() -> None:
    import os
    import subprocess
    import sys

    code = (
        "from converge_dsl.engine import json_problem\n"
        "print(json_problem({'a': 10**640}), json_problem({'a': 10**639}))\n"
    )
    env = {**os.environ, "PYTHONINTMAXSTRDIGITS": "640"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.stdout == (
        "data at /a: an integer of more than 640 digits (JSON readers refuse it) None\n"
    ), done.stderr


def test_data_that_fits_a_key_schema_is_checked_without_python_jsonschema() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from converge_dsl.engine._data import KeySchemas\n"
        "schemas = KeySchemas({'k': {'type': 'object', 'required': ['id']}})\n"
        "assert schemas.problem('k', '{\"id\": 1}') is None\n"
        "assert not {'jsonschema', 'referencing'} & set(sys.modules)\n"
        "assert schemas.problem('k', '{}') is not None\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- evidence of a check already made (an llm item checked against its key's schema) -----

PLAIN = {
    "type": "object",
    "required": ["category"],
    "properties": {"category": TICKET["properties"]["category"]},
}


def _vouched(data: Any, schema: Any = PLAIN, fid: str = "t1") -> ProposedFact:
    _, fitted = python_validator(schema, "the schema of key 'tickets'").judge(data)
    assert fitted is not None
    return ProposedFact("tickets", fid, "c", 1.0, Provenance("triage"), data)._vouched(fitted)


def test_a_proposal_vouched_for_against_its_keys_schema_is_not_checked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = _gate(key_schemas={"tickets": PLAIN})
    proposal = _vouched({"category": "bug", "n": [1, 2]})
    looked: list[Any] = []
    monkeypatch.setattr(QuickCheck, "values", lambda self, value: looked.append(value))
    with run_deadline(FakeClock(), None):
        assert gate.rejection(proposal) is None
        left = _POOLS.get()
    assert looked == []  # not walked again
    with run_deadline(FakeClock(), None):  # charged as the check it stands for
        monkeypatch.undo()
        assert gate.rejection(replace(proposal, id="t2")) is None
        assert _POOLS.get() == left
    assert left == {"schema validation": SCHEMA_RUN_STEPS - 5}


def test_evidence_of_another_schema_or_for_other_data_is_not_taken() -> None:
    gate = _gate(key_schemas={"tickets": PLAIN})
    other = _vouched({"category": "refund"}, {"type": "object"})
    reason = "data at /category: 'refund' is not one of ['billing', 'bug'] (enum)"
    assert gate.rejection(other) == reason
    fits = _vouched({"category": "bug"})
    assert gate.rejection(replace(fits, data={"category": "refund"})) == reason
    assert fits.checked is not None
    assert replace(fits, id="t2").checked is None
    assert getattr(copy.copy(fits), "checked", None) is None
    assert getattr(copy.deepcopy(fits), "checked", None) is None
    unpickled = pickle.loads(pickle.dumps(fits))
    assert unpickled == fits
    assert getattr(unpickled, "checked", None) is None


@pytest.mark.parametrize("total", [10, 12, 17, 1_000])
def test_a_run_past_its_schema_total_stops_the_same_way_with_evidence(
    monkeypatch: pytest.MonkeyPatch, total: int
) -> None:
    monkeypatch.setattr(safe_schema, "SCHEMA_RUN_STEPS", total)
    validator = python_validator(PLAIN, "the schema of key 'tickets'")

    def run(vouch: bool) -> Any:
        def propose(ctx: Any) -> list[ProposedFact]:
            proposals = []
            for index in range(3):  # checked as an llm checks its items: 3 steps each
                data = {"category": "bug", "n": index}
                _, fitted = validator.judge(data)
                made = ProposedFact("tickets", f"t{index}", "c", 1.0, Provenance("triage"), data)
                proposals.append(made._vouched(fitted) if vouch else made)
            return proposals

        engine = Engine(
            policy=PromotionPolicy(key_schemas={"tickets": PLAIN}), declared_keys=("tickets",)
        )
        engine.register(FnSuggestor("triage", [], propose))
        return asyncio.run(engine.run())

    vouched, checked = run(True), run(False)
    assert vouched.stop_reason is checked.stop_reason
    assert str(vouched.error) == str(checked.error)
    assert getattr(vouched.error, "code", None) == getattr(checked.error, "code", None)
    assert [f.id for f in vouched.context.get("tickets")] == [
        f.id for f in checked.context.get("tickets")
    ]
    if total == 1_000:
        assert vouched.stop_reason is StopReason.CONVERGED
    else:  # the llm-like checks take 9 steps, the gate's 3 more each
        assert vouched.stop_reason is StopReason.ERROR
        assert getattr(vouched.error, "code", None) == codes.SCHEMA_RUN_WORK_EXCEEDED
