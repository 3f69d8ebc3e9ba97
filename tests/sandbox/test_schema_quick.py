"""The quick yes of a schema check agrees with python-jsonschema, and is taken."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from converge_dsl.engine.types import freeze_json
from converge_dsl.sandbox import GovernedValidator, python_validator
from converge_dsl.sandbox._schema_quick import NEVER, QUICK_PRODUCT, QuickCheck

NAMES = ("a", "b", "c")
COUNTS = (
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minContains",
    "maxContains",
)
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")

_NUMBERS = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.5, 1e300, -1e300]),
    st.floats(-4, 4, allow_nan=False),
)
_DATA = st.recursive(
    st.one_of(st.none(), st.booleans(), _NUMBERS, st.sampled_from(("", *NAMES, "ab", "é"))),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(NAMES), inner, max_size=3)
    ),
    max_leaves=8,
)
_COUNT = st.integers(0, 3)


def _one_of(names: tuple[str, ...], value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """{name: value} for one of `names`."""
    return st.tuples(st.sampled_from(names), value).map(lambda pair: {pair[0]: pair[1]})


def _keywords(schema: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    one = st.one_of(
        st.fixed_dictionaries(
            {"type": st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES), unique=True)}
        ),
        st.fixed_dictionaries({"enum": st.lists(_DATA, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"const": _DATA}),
        _one_of(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), _NUMBERS),
        st.dictionaries(
            st.sampled_from(COUNTS),
            _COUNT,
            min_size=1,
            max_size=2,
        ),
        st.fixed_dictionaries({"uniqueItems": st.booleans()}),
        st.fixed_dictionaries({"required": st.lists(st.sampled_from(NAMES), unique=True)}),
        st.fixed_dictionaries(
            {
                "dependentRequired": st.dictionaries(
                    st.sampled_from(NAMES), st.lists(st.sampled_from(NAMES), unique=True)
                )
            }
        ),
        st.fixed_dictionaries(
            {"properties": st.dictionaries(st.sampled_from(NAMES), schema, max_size=2)}
        ),
        st.fixed_dictionaries({"additionalProperties": schema}),
        st.fixed_dictionaries({"items": schema}),
        st.fixed_dictionaries({"prefixItems": st.lists(schema, min_size=1, max_size=2)}),
        _one_of(("allOf", "anyOf", "oneOf"), st.lists(schema, min_size=1, max_size=2)),
        st.fixed_dictionaries({"not": schema}),
        st.fixed_dictionaries({"if": schema, "then": schema, "else": schema}),
        st.fixed_dictionaries({"contains": schema}),
        st.fixed_dictionaries({"propertyNames": schema}),
        st.fixed_dictionaries(
            {"dependentSchemas": st.dictionaries(st.sampled_from(NAMES), schema, max_size=2)}
        ),
    )
    return st.lists(one, min_size=1, max_size=3).map(
        lambda parts: {k: v for p in parts for k, v in p.items()}
    )


SCHEMAS = st.recursive(st.booleans() | _keywords(st.just({})), _keywords, max_leaves=6)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(SCHEMAS, _DATA)
def test_a_quick_yes_is_python_jsonschemas_yes(schema: Any, data: Any) -> None:
    quick = QuickCheck.of(schema)
    assume(quick is not NEVER)  # a schema jsonschema-rs refuses
    python = GovernedValidator(python_validator(schema).validator, "the schema")
    fits = python.best_error(data) is None
    if quick(data):
        assert fits, (schema, data)
    assert quick(freeze_json(data)) == quick(data)


def test_plain_schemas_are_checked_quickly_and_others_are_not() -> None:
    ticket = {
        "type": "object",
        "required": ["id"],
        "additionalProperties": False,
        "properties": {"id": {"type": "string", "minLength": 1}, "n": {"enum": [1, 2]}},
    }
    assert QuickCheck.of(ticket) is not NEVER
    for other in (
        {"properties": {"id": {"pattern": "^T-"}}},
        {"$defs": {"t": {"type": "string"}}, "items": {"$ref": "#/$defs/t"}},
        {"format": "date"},
        {"multipleOf": 0.1},
        {"unevaluatedProperties": False},
        {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]},
    ):
        assert QuickCheck.of(other) is NEVER, other


def test_only_small_plain_data_is_answered_quickly() -> None:
    quick = QuickCheck.of({"type": "array"})
    assert quick([1, "x", {"a": None}, 2.5])
    assert not quick([2**60])  # beyond exact comparison: python-jsonschema decides
    assert not quick([float("nan")])
    assert not quick({1: "x"})
    assert not quick([object()])
    assert not quick(list(range(QUICK_PRODUCT)))  # too many values for the bound
    assert not quick("not an array")  # a no is python-jsonschema's to word


def test_a_governed_check_takes_the_quick_yes() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}

    class Refusing:
        def iter_errors(self, instance: object) -> Any:
            raise AssertionError("python-jsonschema was asked")

    validator = GovernedValidator(Refusing(), "the schema", QuickCheck.of(schema))
    assert validator.best_error({"a": 1}) is None
    assert validator.is_valid({"a": 1})
    assert list(validator.iter_errors({"a": 1})) == []
    error = python_validator(schema).best_error({"a": "x"})  # a no is worded as before
    assert error is not None
    assert error.message == "'x' is not of type 'integer'"
