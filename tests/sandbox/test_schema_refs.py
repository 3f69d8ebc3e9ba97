"""`remote_refs` and `dangling_refs`: the references validate reports, and only those."""

from __future__ import annotations

from typing import Any

import pytest

from converge_dsl.sandbox import schema_problems
from converge_dsl.sandbox._schema_refs import dangling_refs, remote_refs

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
