"""`remote_refs`, `dangling_refs`, `misplaced_refs`: the references validate reports."""

from __future__ import annotations

from typing import Any

import pytest

from converge_dsl.sandbox import UnsafeSchema, check_safe, python_validator, schema_problems
from converge_dsl.sandbox._schema_refs import dangling_refs, misplaced_refs, remote_refs

DEFS = {"queue": {"enum": ["billing", "tech"]}, "a b": {"type": "string"}, "x/y": {}}


@pytest.mark.parametrize(
    "ref",
    [
        "#",
        "#/$defs/queue",
        "#/$defs/a%20b",  # a fragment is percent-encoded
        "#/$defs/x~1y",  # and a pointer escapes '/'
        "#/properties/queue",
        "#/properties/tags/items/0",
        "#tagged",  # an anchor a subschema declares
    ],
)
def test_a_reference_that_names_a_part_of_the_schema_is_not_dangling(ref: str) -> None:
    schema = {
        "$defs": DEFS,
        "properties": {
            "queue": {"$ref": ref},
            "tags": {"items": [{"$anchor": "tagged", "type": "string"}]},
        },
    }
    assert dangling_refs(schema) == []


@pytest.mark.parametrize(
    ("ref", "guess"),
    [
        ("#/$defs/queues", "#/$defs/queue"),
        ("#/$defs/person", None),
        ("#/definitions/queue", None),  # no `definitions` section
        ("#/properties/nope", None),
        ("#queue", "#/$defs/queue"),  # an anchor where a definition of the name exists
        ("#taged", "#tagged"),
        ("#/$defs/a b", None),  # unencoded: not the fragment of 'a b'
    ],
)
def test_a_reference_that_names_nothing_is_found_with_what_it_likely_meant(
    ref: str, guess: str | None
) -> None:
    schema = {
        "$defs": DEFS,
        "properties": {"queue": {"$ref": ref}, "tags": {"$anchor": "tagged"}},
    }
    expected = [] if ref == "#/$defs/a b" else [(("properties", "queue", "$ref"), guess)]
    assert dangling_refs(schema) == expected


def test_references_in_data_and_under_a_nested_id_are_not_checked() -> None:
    schema: dict[str, Any] = {
        "properties": {
            "a": {"const": {"$ref": "#/nowhere"}},
            "b": {"default": {"$ref": "#/nowhere"}},
            "c": {"$id": "urn:inner", "$defs": {"n": {}}, "$ref": "#/$defs/n"},
        }
    }
    assert dangling_refs(schema) == []
    assert remote_refs(schema) == []


def test_every_keyword_of_reference_is_checked() -> None:
    schema = {"anyOf": [{"$dynamicRef": "#/$defs/gone"}, {"$recursiveRef": "#"}]}
    assert dangling_refs(schema) == [(("anyOf", 0, "$dynamicRef"), None)]


def test_schema_problems_reports_a_dangling_reference_as_its_own_kind() -> None:
    schema = {"$defs": DEFS, "properties": {"q": {"$ref": "#/$defs/queues"}}}
    assert schema_problems(schema) == [
        (
            ("properties", "q", "$ref"),
            "dangling",
            "$ref '#/$defs/queues' points to nothing in the schema (did you mean '#/$defs/queue'?)",
        )
    ]


@pytest.mark.parametrize(
    "schema",
    [
        {"properties": {"default": {"$anchor": "d"}, "x": {"$ref": "#d"}}},
        {"$defs": {"enum": {"$anchor": "e"}}, "properties": {"x": {"$ref": "#e"}}},
        {"$defs": {"const": {"type": "string"}}, "$ref": "#/$defs/const"},
        {"properties": {"$id": {"type": "string"}, "y": {"$anchor": "yy"}}, "$ref": "#yy"},
        {"patternProperties": {"^examples$": {"$anchor": "p"}}, "items": {"$ref": "#p"}},
        {"dependentSchemas": {"default": {"$anchor": "s"}}, "not": {"$ref": "#s"}},
        {"properties": {"$ref": {"type": "string"}}},  # a property named `$ref`: no reference
        {"properties": {"$ref": {"$ref": "#/$defs/n"}}, "$defs": {"n": {}}},
    ],
)
def test_members_named_like_keywords_are_names_not_keywords(schema: dict[str, Any]) -> None:
    assert dangling_refs(schema) == []
    assert remote_refs(schema) == []
    assert schema_problems(schema) == []
    check_safe(schema)  # nor refused at run time


def test_a_property_named_ref_is_not_a_reference_but_its_schema_is_checked() -> None:
    schema = {"properties": {"$ref": {"$ref": "#/$defs/gone"}, "x": {"$ref": "https://x/y"}}}
    assert dangling_refs(schema) == [(("properties", "$ref", "$ref"), None)]
    assert remote_refs(schema) == [("properties", "x", "$ref")]


def test_references_in_data_are_not_remote() -> None:
    schema = {"properties": {"a": {"default": {"$ref": "https://x/y"}}}}
    assert remote_refs(schema) == []
    assert schema_problems(schema) == []


def test_a_plain_name_id_is_an_anchor_not_a_resource() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"foo": {"$id": "#foo", "type": "string"}},
        "properties": {"a": {"$ref": "#foo"}, "b": {"$ref": "#fo"}},
    }
    assert dangling_refs(schema) == [(("properties", "b", "$ref"), "#foo")]
    del schema["properties"]["b"]  # type: ignore[attr-defined]
    check_safe(schema)
    assert not python_validator(schema).is_valid({"a": 1})


def test_references_inside_a_plain_name_id_are_checked_against_the_root() -> None:
    schema = {"definitions": {"b": {"$id": "#b", "$ref": "#/definitions/c"}}}
    assert dangling_refs(schema) == [(("definitions", "b", "$ref"), None)]
    assert dangling_refs({"properties": {"a": {"$id": 3, "$ref": "#nowhere"}}}) == [
        (("properties", "a", "$ref"), None)
    ]


def test_a_regex_in_a_property_named_like_a_data_keyword_is_checked() -> None:
    schema = {"properties": {"default": {"pattern": "(a)\\1"}, "enum": {"pattern": "^a$"}}}
    assert [(where, kind) for where, kind, _ in schema_problems(schema)] == [
        (("properties", "default", "pattern"), "regex")
    ]


@pytest.mark.parametrize(
    ("defs", "ref", "guess"),
    [
        ({"queue/v2": {}}, "#/$defs/queue~1v3", "#/$defs/queue~1v2"),
        ({"a~b": {}}, "#/$defs/a~0c", "#/$defs/a~0b"),
        ({"queue/v2": {}}, "#/$defs/queue~1v2/x", None),
    ],
)
def test_a_guess_decodes_names_and_is_itself_a_pointer(
    defs: dict[str, Any], ref: str, guess: str | None
) -> None:
    schema = {"$defs": defs, "properties": {"q": {"$ref": ref}}}
    assert dangling_refs(schema) == [(("properties", "q", "$ref"), guess)]
    if guess is not None:
        assert dangling_refs({**schema, "properties": {"q": {"$ref": guess}}}) == []


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        # a schema under an unknown keyword, wider than the limits allow
        ({"$ref": "#/x", "x": {"anyOf": [{"const": i} for i in range(2000)]}}, ("$ref",)),
        ({"$ref": "#/x", "x": {"enum": list(range(5000))}}, ("$ref",)),
        # a pattern RE2 would refuse, in data
        ({"not": {"$ref": "#/default"}, "default": {"pattern": "(a+)+$"}}, ("not", "$ref")),
        ({"items": {"$ref": "#/examples/0"}, "examples": [{"type": "integer"}]}, ("items", "$ref")),
        # a map of schemas is not a schema
        ({"properties": {"a": {}}, "not": {"$ref": "#/properties"}}, ("not", "$ref")),
    ],
)
def test_a_pointer_to_a_value_no_schema_keyword_holds_is_refused(
    schema: dict[str, Any], where: tuple[str | int, ...]
) -> None:
    """A validator applies what such a pointer names as a schema; the checks that walk the
    schema's keywords read it as data, so it would be applied unchecked."""
    assert misplaced_refs(schema) == [where]
    assert [(w, kind) for w, kind, _ in schema_problems(schema)] == [(where, "dangling")]
    with pytest.raises(UnsafeSchema, match="not a schema"):
        check_safe(schema)


@pytest.mark.parametrize(
    "ref",
    ["#", "#/", "#/$defs/queue", "#/properties/tags/items/0", "#/definitions/old", "#/not"],
)
def test_a_pointer_to_a_schema_is_not_misplaced(ref: str) -> None:
    schema = {
        "$defs": DEFS,
        "definitions": {"old": {"type": "string"}},
        "not": {"type": "null"},
        "properties": {"queue": {"$ref": ref}, "tags": {"items": [{"type": "string"}]}},
    }
    assert misplaced_refs(schema) == []
