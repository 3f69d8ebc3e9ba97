"""Schema checks are bounded: size limits, linear equality keywords, governed and located work."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema._utils import equal

from converge_dsl import codes
from converge_dsl.clock import FakeClock
from converge_dsl.engine import (
    Budget,
    Engine,
    PromotionPolicy,
    ProposedFact,
    Provenance,
    StopReason,
)
from converge_dsl.engine.testing import FnSuggestor
from converge_dsl.engine.types import ContextView
from converge_dsl.sandbox import _safe_schema as safe
from converge_dsl.sandbox._governor import DeadlinePassed, Exhausted, governed, run_deadline
from converge_dsl.sandbox._safe_schema import UnsafeSchema, fast_validator, python_validator
from converge_dsl.sandbox._schema_bounds import (
    MAX_BRANCHES,
    MAX_ENUM,
    MAX_MEMBERS,
    MAX_SCHEMA_NODES,
    canonical,
    size_problems,
)

MIXED = [i if i % 2 else f"s{i:05d}" for i in range(40_000)]  # items of one size


class TickingClock(FakeClock):
    """A clock that moves `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = step

    def monotonic(self) -> float:
        self.advance(self.step)
        return super().monotonic()


def charged(check: Callable[[], Any]) -> int:
    """The steps plus work `check` charges to the governor (an outer, unbounded budget)."""
    with governed(10**15, 10**15, "test") as budget:
        check()
    return (budget.max_steps - budget.steps) + (budget.max_work - budget.work)


# -- size limits ------------------------------------------------------------------------


def _wide(n: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}


@pytest.mark.parametrize(
    ("schema", "where", "words"),
    [
        (_wide(MAX_MEMBERS + 1), ("properties",), "properties has 1001 entries"),
        ({"enum": list(range(MAX_ENUM + 1))}, ("enum",), "enum has 1001 items"),
        ({"anyOf": [{}] * (MAX_BRANCHES + 1)}, ("anyOf",), "anyOf has 129 items"),
        (
            {"items": {"oneOf": [{"const": i} for i in range(MAX_BRANCHES + 1)]}},
            ("items", "oneOf"),
            "oneOf has 129",
        ),
        ({"required": [f"r{i}" for i in range(MAX_MEMBERS + 1)]}, ("required",), "required"),
        ({"$defs": {f"d{i}": {} for i in range(MAX_MEMBERS + 1)}}, ("$defs",), "$defs has"),
    ],
)
def test_a_schema_past_a_limit_is_refused_where_the_limit_is_crossed(
    schema: dict[str, Any], where: tuple[str, ...], words: str
) -> None:
    problems = size_problems(schema)
    assert [p for p, _ in problems] == [where]
    assert words in problems[0][1]
    assert [kind for _, kind, _ in safe.schema_problems(schema)] == ["size"]
    with pytest.raises(UnsafeSchema, match=re.escape(words)):
        python_validator(schema)
    with pytest.raises(UnsafeSchema):
        fast_validator(schema)


def test_a_schema_too_large_in_all_is_refused_at_its_root_and_the_walk_stops() -> None:
    deep = {f"d{i}": {"properties": {f"p{j}": {} for j in range(900)}} for i in range(1000)}
    problems = size_problems({"$defs": deep})
    assert problems[-1][0] == ()
    assert f"more than {MAX_SCHEMA_NODES}" in problems[-1][1]
    huge = size_problems(_wide(100_000))  # the audit's schema: both limits, nothing more
    assert [where for where, _ in huge] == [("properties",), ()]
    with pytest.raises(UnsafeSchema, match="at /properties: properties has 100000 entries"):
        python_validator(_wide(100_000))  # the most precise reason first


def test_a_schema_too_large_is_refused_before_its_text_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    def dumps(*args: Any, **kwargs: Any) -> str:
        raise AssertionError("the whole schema was written out")

    monkeypatch.setattr(safe, "json", types.SimpleNamespace(dumps=dumps))
    with pytest.raises(UnsafeSchema, match="more than 20000 members"):
        python_validator({"default": [0] * (MAX_SCHEMA_NODES + 1)})


def test_schemas_within_the_limits_and_data_keywords_are_not_counted_as_schemas() -> None:
    assert size_problems(_wide(MAX_MEMBERS)) == []
    # enum values are data: an object inside one is not read as a schema with `properties`.
    assert size_problems({"enum": [{"properties": dict.fromkeys(map(str, range(1001)), 0)}]}) == []
    assert not [p for p in size_problems({"const": {"anyOf": [0] * 200}}) if p[0] != ()]


TOO_MANY = [{}] * (MAX_BRANCHES + 1)


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        # Members named like data keywords are schemas: their keywords are bounded.
        ({"properties": {"default": {"anyOf": TOO_MANY}}}, ("properties", "default", "anyOf")),
        ({"properties": {"examples": {"oneOf": TOO_MANY}}}, ("properties", "examples", "oneOf")),
        ({"$defs": {"const": {"enum": list(range(MAX_ENUM + 1))}}}, ("$defs", "const", "enum")),
        ({"definitions": {"enum": {"allOf": TOO_MANY}}}, ("definitions", "enum", "allOf")),
        (
            {"patternProperties": {"default": {"items": {"anyOf": TOO_MANY}}}},
            ("patternProperties", "default", "items", "anyOf"),
        ),
        (
            {"dependentSchemas": {"examples": {"properties": {"default": {"anyOf": TOO_MANY}}}}},
            ("dependentSchemas", "examples", "properties", "default", "anyOf"),
        ),
        # The keywords of schemas written before draft 2020-12 hold schemas and names too.
        ({"dependencies": {f"d{i}": ["x"] for i in range(MAX_MEMBERS + 1)}}, ("dependencies",)),
        ({"items": [{}] * (MAX_MEMBERS + 1)}, ("items",)),
        ({"items": [{}, {"anyOf": TOO_MANY}]}, ("items", 1, "anyOf")),
    ],
)
def test_the_keywords_of_members_named_like_keywords_are_bounded(
    schema: dict[str, Any], where: tuple[str | int, ...]
) -> None:
    assert [p for p, _ in size_problems(schema)] == [where]
    with pytest.raises(UnsafeSchema):
        python_validator(schema)


@pytest.mark.parametrize(
    "schema",
    [
        # A member named like a keyword is a name: its schema is not that keyword's value.
        {"properties": {"properties": {f"x-{i}": i for i in range(MAX_MEMBERS + 1)}}},
        {"properties": {"enum": {"type": "string"}, "anyOf": {}, "required": {}}},
        {"$defs": {"required": {"description": "r" * 2_000}}},
        # An unknown keyword's value is data, as `default`'s is: counted, never a schema.
        {"x-note": {"anyOf": TOO_MANY}, "$comment": "see anyOf", "title": "t"},
        {"default": {"properties": {"a": {"enum": list(range(MAX_ENUM + 1))}}}},
    ],
)
def test_names_and_data_that_look_like_keywords_are_not_bounded_as_keywords(
    schema: dict[str, Any],
) -> None:
    assert size_problems(schema) == []


def test_data_and_names_count_towards_the_whole_schema() -> None:
    # The members of data (a `default`, an unknown keyword's value) are part of the schema.
    for where in ("default", "x-data"):
        schema = {where: [[0] * 1_000] * (MAX_SCHEMA_NODES // 1_000)}
        assert [p for p, _ in size_problems(schema)] == [()]
        schema[where].pop()
        assert size_problems(schema) == []


# -- JSON equality in linear time ---------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, 1.0, -1.0, 2.5])
    | st.sampled_from(["", "a", "1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=8,
)


@given(json_values, json_values)
def test_canonical_keys_are_equal_exactly_when_json_schema_says_equal(a: Any, b: Any) -> None:
    assert (canonical(a) == canonical(b)) == equal(a, b)
    if canonical(a) == canonical(b):
        assert hash(canonical(a)) == hash(canonical(b))


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([1, True], True),
        ([0, False], True),
        ([{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}], False),
        ([[1, 2], [2, 1]], True),
        (["1", 1], True),
        ([None, [], {}], True),
        ([[True], [1]], True),
    ],
)
def test_unique_items_follows_json_schema_equality(items: list[Any], unique: bool) -> None:
    validator = python_validator({"uniqueItems": True})
    assert validator.is_valid(items) is unique
    assert fast_validator({"uniqueItems": True}).is_valid(items) is unique


def test_enum_and_const_compare_as_json_schema_does() -> None:
    enum = python_validator({"enum": [1, "a", {"k": [1]}]})
    assert enum.is_valid(1.0)
    assert enum.is_valid({"k": [1.0]})
    assert not enum.is_valid(True)
    assert [e.message for e in enum.iter_errors(2)] == ["2 is not one of [1, 'a', {'k': [1]}]"]
    const = python_validator({"const": False})
    assert const.is_valid(False)
    assert not const.is_valid(0)
    assert [e.message for e in const.iter_errors(0)] == ["False was expected"]


def test_unique_items_over_forty_thousand_mixed_values_charges_in_proportion() -> None:
    validator = python_validator({"type": "array", "uniqueItems": True})
    work = charged(lambda: validator.is_valid(MIXED))
    half = charged(lambda: validator.is_valid(MIXED[:20_000]))
    assert validator.is_valid(MIXED)
    assert work <= 2 * half + 100
    assert not validator.is_valid([*MIXED, "s00000"])


def test_unevaluated_items_is_linear() -> None:
    validator = python_validator({"prefixItems": [{}], "unevaluatedItems": {"type": "integer"}})
    big, small = list(range(20_000)), list(range(10_000))
    assert validator.is_valid(big)
    assert (
        charged(lambda: validator.is_valid(big))
        <= 2 * charged(lambda: validator.is_valid(small)) + 100
    )


# -- bounds crossed: located, with a code --------------------------------------------------

BRANCHES = {"anyOf": [{"type": "object", "required": [f"k{i}"]} for i in range(100)]}
HEAVY = {"type": "object", "properties": {"vals": {"type": "array", "items": BRANCHES}}}


def test_a_validation_past_its_bound_names_the_schema_keyword_and_data() -> None:
    validator = python_validator(HEAVY, "the schema of key 'tickets'")
    with pytest.raises(Exhausted) as caught:
        validator.best_error({"vals": list(range(40_000))})
    exc = caught.value
    assert exc.code == codes.SCHEMA_WORK_EXCEEDED
    assert exc.message.startswith("checking data against the schema of key 'tickets'")
    assert "keyword at /properties/vals/items/anyOf/" in exc.message
    assert "data at /vals" in exc.message
    assert "smaller data" in (exc.hint or "")


def test_a_crossed_bound_inside_a_ref_is_located_inside_its_target() -> None:
    schema = {"properties": {"a": {"$ref": "#/$defs/many"}}, "$defs": {"many": HEAVY}}
    with pytest.raises(Exhausted, match=r"keyword at /\$defs/many/properties/vals/items/anyOf/"):
        python_validator(schema).best_error({"a": {"vals": [0] * 40_000}})


def test_a_ref_target_with_escaped_parts_is_named_as_written() -> None:
    schema = {"properties": {"a": {"$ref": "#/$defs/a~1b"}}, "$defs": {"a/b": HEAVY}}
    with pytest.raises(Exhausted, match=r"keyword at /\$defs/a~1b/properties/vals/items/anyOf/"):
        python_validator(schema).best_error({"a": {"vals": [0] * 40_000}})


def test_the_runs_total_bounds_many_small_validations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(safe, "SCHEMA_RUN_STEPS", 5_000)
    validator = python_validator({"type": "array", "items": {"type": "integer"}})
    validator.is_valid(list(range(3_000)))  # outside a run: no total
    validator.is_valid(list(range(3_000)))
    with run_deadline(FakeClock(), None):
        validator.is_valid(list(range(3_000)))
        with pytest.raises(Exhausted) as caught:
            validator.is_valid(list(range(3_000)))
    assert caught.value.code == codes.SCHEMA_RUN_WORK_EXCEEDED
    assert "the run past its total of 5000 steps of schema validation" in caught.value.message
    with run_deadline(FakeClock(), None):  # each run has its own total
        validator.is_valid(list(range(3_000)))


def test_the_deadline_is_watched_inside_one_validation() -> None:
    validator = python_validator({"type": "array", "uniqueItems": True, "items": {}})
    clock = TickingClock(0.01)
    with run_deadline(clock, 1.0), pytest.raises(DeadlinePassed) as caught:
        validator.is_valid(list(range(200_000)))
    assert caught.value.code == codes.SCHEMA_DEADLINE_PASSED
    assert "deadline (max_wall_s) passed while checking data against the schema" in str(
        caught.value
    )


def test_unbudgeted_work_still_watches_the_deadline() -> None:
    clock = FakeClock()
    with run_deadline(clock, 1.0):
        clock.advance(5)
        with pytest.raises(DeadlinePassed):
            list(map(safe.search, ["a"] * 1_000, ["a"] * 1_000))


# -- the engine: the gate's check stops the run, located -----------------------------------


def _run_with(data: Any, clock: FakeClock, schema: dict[str, Any]) -> Any:
    def propose(ctx: ContextView) -> list[ProposedFact]:
        return [ProposedFact("signals", "big", "big data", 1.0, Provenance("maker"), data)]

    policy = PromotionPolicy(key_schemas={"signals": schema}, max_content_length=10**8)
    engine = Engine(budget=Budget(max_wall_s=10), clock=clock, policy=policy)
    engine.register(FnSuggestor("maker", [], propose))
    return asyncio.run(engine.run())


def test_data_past_the_bound_at_the_gate_stops_the_run_with_a_located_note() -> None:
    result = _run_with({"vals": list(range(40_000))}, FakeClock(), HEAVY)
    assert result.stop_reason is StopReason.ERROR
    (note,) = result.notes
    assert note.code == codes.SCHEMA_WORK_EXCEEDED
    assert note.suggestor == "maker"
    assert "proposal 'big' to key 'signals'" in note.message
    assert "anyOf" in note.message


def test_data_checked_past_the_deadline_stops_the_run_as_the_deadline() -> None:
    schema = {"type": "array", "uniqueItems": True}
    result = _run_with(list(range(200_000)), TickingClock(0.05), schema)
    assert result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert [n.code for n in result.notes] == [codes.STOP_TIME_BUDGET, codes.SCHEMA_DEADLINE_PASSED]
    assert "uniqueItems keyword at /uniqueItems" in result.notes[1].message


def test_data_within_the_bounds_is_promoted() -> None:
    result = _run_with(MIXED, FakeClock(), {"type": "array", "uniqueItems": True})
    assert result.stop_reason is StopReason.CONVERGED
    assert result.context.fact("signals", "big") is not None


# -- work grows at most linearly with the data, whatever the schema -----------------------

leaf_schemas = st.sampled_from(
    [
        {},
        {"type": "integer"},
        {"type": ["string", "null"], "maxLength": 3},
        {"enum": [0, 1, "a", None, [1], {"k": 1}]},
        {"const": 1},
        {"pattern": "^a+$"},
        {"minimum": 0, "multipleOf": 1},
    ]
)
schemas = st.recursive(
    leaf_schemas,
    lambda inner: st.one_of(
        st.builds(lambda s: {"type": "array", "items": s, "uniqueItems": True}, inner),
        st.builds(lambda s: {"items": s, "contains": {"type": "integer"}}, inner),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"oneOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"allOf": [a, b]}, inner, inner),
        st.builds(lambda s: {"not": s}, inner),
        st.builds(
            lambda s: {"properties": {"a": s}, "additionalProperties": s, "required": ["a"]},
            inner,
        ),
        st.builds(lambda s: {"prefixItems": [s], "unevaluatedItems": s}, inner),
        st.builds(
            lambda s: {"patternProperties": {"^k": s}, "propertyNames": {"maxLength": 3}}, inner
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas, st.lists(json_values, min_size=1, max_size=12), st.sampled_from([2, 4, 8]))
def test_validation_work_grows_at_most_linearly_with_the_data(
    schema: dict[str, Any], items: list[Any], times: int
) -> None:
    validator = python_validator(schema)
    whole = {"type": "array", "items": schema}
    outer = python_validator(whole)
    base = charged(lambda: list(outer.iter_errors(items)))
    empty = charged(lambda: list(outer.iter_errors([])))
    longer = list(itertools.chain.from_iterable(itertools.repeat(items, times)))
    grown = charged(lambda: list(outer.iter_errors(longer)))
    # Each item costs what it costs alone; the array's own keywords are a constant.
    assert grown <= times * base + empty
    for item in items:  # and one value charges no more than its share of the array
        assert charged(lambda item=item: list(validator.iter_errors(item))) <= base


_SHORT_CIRCUIT = ("prefixItems", "anyOf", "oneOf", "not", "if", "contains")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schemas,
    st.lists(json_values, min_size=1, max_size=30),
    st.lists(json_values, min_size=1, max_size=30),
)
def test_checking_two_arrays_joined_costs_no_more_than_checking_each(
    schema: dict[str, Any], first: list[Any], second: list[Any]
) -> None:
    # Super-linear work (all pairs of items, say) would cost more joined than apart.
    # The second array's items are tagged ("b" is no string of the first), so joining
    # makes no duplicate and no error of its own. Keywords that look at positions
    # (`prefixItems`) judge the second array's items differently once they move, and
    # those that stop at a first success or failure (`anyOf`, `oneOf`, `not`, `if`,
    # `contains`) may stop on a part but not on the whole: they are left to the
    # growth test above.
    text = json.dumps(schema)
    assume(not any(f'"{word}"' in text for word in _SHORT_CIRCUIT))
    second = [["b", item] for item in second]
    validator = python_validator(schema)

    def cost(data: list[Any]) -> int:
        return charged(lambda: list(validator.iter_errors(data)))

    # An error's message may quote the array it judges: that costs its text once more.
    quoted = 2 * len(json.dumps(first + second, default=str))
    assert cost(first + second) <= cost(first) + cost(second) + cost([]) + quoted
