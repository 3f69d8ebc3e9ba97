"""A key schema written for an older draft, placed in the service's draft 2020-12 documents:
restated where its meaning carries over, else any value saying why; never accepting less
than the service's own check of a fact."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from converge_dsl.batch import load
from converge_dsl.sandbox import meta_error, python_validator
from converge_dsl.serve import document
from converge_dsl.serve._openapi_drafts import in_2020_12
from converge_dsl.serve._openapi_refs import Components

PREFIX = "#/components/schemas/"
DOC = "urn:converge-dsl:test-document"
DRAFTS = {
    "draft-04": "http://json-schema.org/draft-04/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
}
D4, D6, D7, D2019 = DRAFTS.values()


def _placed(schema: Any) -> tuple[Components, Draft202012Validator]:
    """The components `schema` is placed in, and a 2020-12 validator of the placed schema,
    after checking that a document holding them is valid OpenAPI 3.1."""
    components = Components(PREFIX, {})
    ref = components.place(schema, "Key")
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {},
        "components": {"schemas": components.schemas},
    }
    validate(spec)
    resource = Resource(contents=spec, specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(DOC, resource)
    return components, Draft202012Validator({"$ref": DOC + ref["$ref"]}, registry=registry)


# name -> (schema, instances it accepts, instances it refuses): restated exactly.
RESTATED: dict[str, tuple[dict[str, Any], list[Any], list[Any]]] = {
    "draft 4's boolean exclusive bounds": (
        {
            "$schema": D4,
            "maximum": 5,
            "exclusiveMaximum": True,
            "minimum": 1,
            "exclusiveMinimum": False,
        },
        [1, 4.5, "not a number"],
        [5, 0],
    ),
    "keywords a draft does not know are ignored": (
        {"$schema": D4, "const": 1, "contains": {"type": "string"}, "if": {"type": "string"}},
        [2, [1], "s"],
        [],
    ),
    "if is draft 7's, not draft 6's": (
        {"$schema": D6, "if": {"type": "string"}, "then": {"maxLength": 1}, "minimum": 0},
        ["long", 0],
        [-1],
    ),
    "items written as an array, with additionalItems": (
        {
            "$schema": D7,
            "items": [{"type": "string"}, {"type": "integer"}],
            "additionalItems": False,
        },
        [["a", 1], ["a"], []],
        [[1], ["a", "b"], ["a", 1, None]],
    ),
    "additionalItems beside an items schema is ignored": (
        {"$schema": D7, "items": {"type": "integer"}, "additionalItems": False},
        [[1, 2, 3]],
        [["a"]],
    ),
    "dependencies of names and of schemas": (
        {"$schema": D7, "dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
        [{"a": 1, "b": 2}, {"c": 1, "d": 2}, {}],
        [{"a": 1}, {"c": 1}],
    ),
    "the siblings of a $ref are ignored up to draft 7": (
        {
            "$schema": D7,
            "type": "object",
            "properties": {
                "n": {"$ref": "#/definitions/n", "type": "string", "maximum": 0, "$id": "x"}
            },
            "definitions": {"n": {"type": "integer", "maximum": 3}},
        },
        [{"n": 3}, {}],
        [{"n": "s"}, {"n": 4}],
    ),
    "2019-09 items array with unevaluatedItems; its siblings of $ref apply": (
        {
            "$schema": D2019,
            "items": [{"type": "string"}],
            "unevaluatedItems": False,
            "properties": {"a": {"$ref": "#/$defs/n", "minimum": 2}},
            "$defs": {"n": {"type": "integer"}},
        },
        [["s"], [], {"a": 2}],
        [["s", 1], {"a": 1}, {"a": "s"}],
    ),
    "draft 4's id names an anchor": (
        {
            "$schema": D4,
            "properties": {"a": {"$ref": "#/definitions/a"}},
            "definitions": {"a": {"id": "#a", "type": "integer"}},
        },
        [{"a": 1}],
        [{"a": "s"}],
    ),
}


@pytest.mark.parametrize("case", RESTATED)
def test_an_older_schema_is_restated_to_accept_and_refuse_what_the_service_does(
    case: str,
) -> None:
    schema, good, bad = RESTATED[case]
    before = copy.deepcopy(schema)
    assert meta_error(schema) is None
    components, placed = _placed(schema)
    alone = python_validator(schema)  # the service's own check, in the schema's draft
    assert "$schema" not in json.dumps(components.schemas)
    assert "description" not in components.schemas["Key"]
    for instance in good:
        assert alone.is_valid(instance), instance
        assert placed.is_valid(instance), instance
    for instance in bad:
        assert not alone.is_valid(instance), instance
        assert not placed.is_valid(instance), instance
    assert schema == before  # placing copies


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"$schema": "http://json-schema.org/draft-03/schema#", "type": "string"}, "draft-03"),
        (
            {
                "$schema": D7,
                "items": [{"type": "string"}],
                "properties": {"a": {"$ref": "#/items/0"}},
            },
            "$ref '#/items/0' points to a place that draft 2020-12 words otherwise",
        ),
        (
            {"$schema": D7, "properties": {"a": {"$schema": D4, "maximum": 1}}},
            "names a draft of its own at /properties/a ($schema)",
        ),
        (
            {
                "$schema": D7,
                "properties": {"a": {"$ref": "#/definitions/a"}, "b": {"$ref": "#b"}},
                "definitions": {"a": {"$ref": "#/definitions/a2", "$id": "#b"}, "a2": {}},
            },
            "its anchor '#b' is declared otherwise there",
        ),
    ],
)
def test_an_older_schema_that_cannot_be_restated_is_placed_as_any_value_saying_why(
    schema: dict[str, Any], why: str
) -> None:
    components, placed = _placed(schema)
    (component,) = components.schemas.values()
    assert set(component) == {"description"}
    assert component["description"].startswith("Any JSON value here: the key's own schema is")
    assert why in component["description"]
    assert all(placed.is_valid(value) for value in (None, 1, "s", [1], {"a": 1}))


def test_a_2020_12_schema_is_not_restated() -> None:
    for schema in (
        {"type": "integer"},
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "items": {}},
    ):
        assert in_2020_12(schema)[0] is schema


# -- never less than the service's check, whatever the older schema ------------------------

leaves = st.sampled_from(
    [
        {},
        {"type": "integer"},
        {"type": ["string", "null"]},
        {"const": 1},
        {"enum": [1, "a", None]},
        {"required": ["a"]},
        {"minimum": 0, "maximum": 2},
        {"maximum": 2, "exclusiveMaximum": True},
        {"exclusiveMinimum": 0},
        {"minItems": 1},
        {"contains": {"type": "integer"}, "minContains": 2},
        {"prefixItems": [{"type": "string"}]},
        {"dependentRequired": {"a": ["b"]}},
        {"$ref": "#/definitions/d"},
        {"$ref": "#/$defs/e", "type": "string"},
        {"unevaluatedProperties": False, "properties": {"a": {}}},
        {"propertyNames": {"maxLength": 1}},
        {"$dynamicRef": "#/definitions/d"},
    ]
)


def _grown(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda a, b: {"items": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"items": [a], "additionalItems": b}, inner, inner),
        st.builds(lambda a, b: {"items": a, "additionalItems": b}, inner, inner),
        st.builds(lambda a, b: {"dependencies": {"a": a, "b": ["a"]}, "not": b}, inner, inner),
        st.builds(
            lambda a, b: {"$ref": "#/definitions/d", "properties": {"a": a}, "anyOf": [b]},
            inner,
            inner,
        ),
        st.builds(lambda a, b: {"if": a, "then": b, "else": {"not": b}}, inner, inner),
        st.builds(lambda a, b: {"allOf": [a], "oneOf": [b, {"type": "boolean"}]}, inner, inner),
        st.builds(
            lambda a: {"properties": {"a": a, "default": a}, "additionalProperties": a}, inner
        ),
    )


bodies = st.recursive(leaves, _grown, max_leaves=5)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1, 3) | st.sampled_from([0.5, 2.0, "", "a", "bc"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(DRAFTS)),
    bodies,
    leaves.filter(lambda leaf: "#/$defs/e" not in str(leaf)),  # `e` itself: no loop
    st.lists(json_values, min_size=1, max_size=8),
)
def test_a_placed_older_schema_never_accepts_less_than_the_service(
    draft: str, body: dict[str, Any], definition: dict[str, Any], instances: list[Any]
) -> None:
    definitions = {"d": {"type": ["integer", "object"]}}
    schema = {
        "$schema": DRAFTS[draft],
        **body,
        "definitions": definitions,
        "$defs": {"e": definition},
    }
    assume(meta_error(schema) is None)
    alone = python_validator(schema)
    _, placed = _placed(schema)
    for instance in instances:
        try:
            accepted = alone.is_valid(instance)
        except Exception:  # a reference its draft does not resolve: the fact is refused
            continue
        if accepted:
            assert placed.is_valid(instance), (schema, instance)


def test_the_served_document_of_older_key_schemas_is_valid_openapi(tmp_path: Path) -> None:
    keys = {
        "bounded": {"$schema": D4, "type": "number", "maximum": 5, "exclusiveMaximum": True},
        "pair": {"$schema": D7, "items": [{"type": "string"}], "additionalItems": False},
        "linked": {"$schema": D6, "dependencies": {"a": ["b"]}},
        "ancient": {"$schema": "http://json-schema.org/draft-03/schema#", "type": "string"},
    }
    lines = "".join(f"  - name: {name}\n    schema: {json.dumps(s)}\n" for name, s in keys.items())
    path = tmp_path / "older.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: older\n"
        f"keys:\n{lines}"
        "seeds:\n  - {id: start, content: go}\n"
        "suggestors:\n"
        "  - {name: r, kind: rule, when: 'true', emit: [{key: seeds, id: s, content: x}]}\n"
    )
    spec = document({"older": load(path)})
    validate(spec)
    schemas = spec["components"]["schemas"]
    assert schemas["OlderBounded"] == {"type": "number", "exclusiveMaximum": 5}
    assert schemas["OlderPair"] == {"prefixItems": [{"type": "string"}], "items": False}
    assert schemas["OlderLinked"] == {"dependentRequired": {"a": ["b"]}}
    assert "written for draft-03" in schemas["OlderAncient"]["description"]
