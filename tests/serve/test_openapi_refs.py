"""A pipeline's schema placed in a larger document: every reference lands where its target
went, so the placed schema accepts and refuses exactly what the schema alone does."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema_rs
import pytest
from jsonschema import Draft202012Validator, validators
from openapi_spec_validator import validate
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from converge_dsl.serve._openapi_refs import Components, camel

PREFIX = "#/components/schemas/"
DOC = "urn:converge-dsl:test-document"
OPENAPI = {"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}}

# name -> (schema, instances it accepts, instances it refuses)
CASES: dict[str, tuple[dict[str, Any], list[Any], list[Any]]] = {
    "recursive through $defs": (
        {
            "$ref": "#/$defs/node",
            "$defs": {
                "node": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    },
                }
            },
        },
        [{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}],
        [{"name": "a", "children": [{"name": "b", "children": [{}]}]}, {"name": 1}],
    ),
    "a definition nested in a definition, and draft-7 definitions": (
        {
            "type": "object",
            "properties": {
                "size": {"$ref": "#/$defs/outer/$defs/inner"},
                "tag": {"$ref": "#/definitions/tag"},
            },
            "$defs": {"outer": {"$defs": {"inner": {"type": "integer", "maximum": 3}}}},
            "definitions": {"tag": {"enum": ["x", "y"]}},
        },
        [{"size": 3, "tag": "x"}, {}],
        [{"size": 4}, {"tag": "z"}],
    ),
    "recursive through its root, a pointer into itself, an anchor": (
        {
            "type": "object",
            "required": ["value"],
            "properties": {
                "value": {"$ref": "#count"},
                "twin": {"$ref": "#/properties/value"},
                "next": {"$ref": "#"},
            },
            "additionalProperties": False,
            "$defs": {"count": {"$anchor": "count", "type": "integer", "minimum": 1}},
        },
        [{"value": 1, "twin": 2, "next": {"value": 2, "next": {"value": 3}}}],
        [{"value": 1, "next": {"value": 0}}, {"value": 1, "twin": 0}, {"value": 1, "x": 1}],
    ),
    "recursive through a dynamic anchor": (
        {
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}},
            "additionalProperties": False,
        },
        [{"kids": [{"kids": []}, {}]}],
        [{"kids": [{"kids": [{"x": 1}]}]}],
    ),
    "names that need escaping in a pointer": (
        {
            "type": "object",
            "properties": {
                "a/b": {"type": "integer"},
                "c~d e%": {"$ref": "#/properties/a~1b"},
                "f": {"$ref": "#/$defs/my%20def"},
                "g": {"$ref": "#/properties/c~0d%20e%25"},
            },
            "$defs": {"my def": {"type": "string"}},
        },
        [{"a/b": 1, "c~d e%": 2, "f": "x", "g": 3}],
        [{"c~d e%": "x"}, {"f": 1}, {"g": "x"}],
    ),
    "an embedded resource resolves its references from itself": (
        {
            "type": "object",
            "properties": {"inner": {"$ref": "#/$defs/inner"}, "top": {"$ref": "#/$defs/x"}},
            "$defs": {
                "x": {"type": "string"},
                "inner": {
                    "$id": "urn:example:inner",
                    "type": "object",
                    "properties": {"x": {"$ref": "#/$defs/x"}, "me": {"$ref": "#"}},
                    "$defs": {"x": {"type": "integer"}},
                },
            },
        },
        [{"inner": {"x": 1, "me": {"x": 2}}, "top": "s"}],
        [{"inner": {"x": "s"}}, {"inner": {"me": {"x": "s"}}}, {"top": 1}],
    ),
    "a plain-name $id is an anchor, not a resource (draft 7)": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"a": {"$ref": "#foo"}, "b": {"$ref": "#/definitions/b"}},
            "definitions": {
                "foo": {
                    "$id": "#foo",
                    "type": "object",
                    "properties": {"x": {"$ref": "#/definitions/b"}},
                },
                "b": {"type": "integer"},
            },
        },
        [{"a": {"x": 1}, "b": 2}, {}],
        [{"a": {"x": "s"}}, {"a": 1}, {"b": "s"}],
    ),
    "draft 4's exclusive bound and id, restated in 2020-12's words": (
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "properties": {"n": {"$ref": "#n"}, "m": {"$ref": "#/definitions/n", "type": "string"}},
            "definitions": {"n": {"id": "#n", "maximum": 3, "exclusiveMaximum": True}},
        },
        [{"n": 2, "m": 2.5}, {"n": "x"}],
        [{"n": 3}, {"m": 3}],
    ),
    "draft 7's items array and dependencies, restated": (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {
                "pair": {"items": [{"type": "string"}, {"$ref": "#"}], "additionalItems": False},
            },
            "dependencies": {"pair": ["kind"], "kind": {"properties": {"kind": {"const": 1}}}},
        },
        [{"pair": ["a", {}], "kind": 1}, {}],
        [{"pair": ["a", {}, 1], "kind": 1}, {"pair": []}, {"kind": 2}, {"pair": [1], "kind": 1}],
    ),
    "members named like keywords, and data that looks like references": (
        {
            "type": "object",
            "properties": {
                "$ref": {"$ref": "#/$defs/n"},
                "default": {"$ref": "#/$defs/n"},
                "const": {"const": {"$ref": "#/$defs/n", "$id": "urn:x", "$anchor": "a"}},
                "enum": {"enum": [{"$ref": "#"}], "default": {"$ref": "#/nowhere"}},
            },
            "$defs": {"n": {"type": "integer"}},
            "examples": [{"$ref": "#/$defs/n"}],
        },
        [{"$ref": 1, "default": 2, "const": {"$ref": "#/$defs/n", "$id": "urn:x", "$anchor": "a"}}],
        [{"$ref": "s"}, {"default": "s"}, {"const": {"$ref": "#/$defs/m"}}, {"enum": 1}],
    ),
}


# openapi-spec-validator follows a `$ref` even inside data (`default`), which these hold.
DATA_REFS = {"members named like keywords, and data that looks like references"}


def _placed(components: Components, ref: dict[str, Any]) -> Draft202012Validator:
    """A validator of `ref` resolved through the document `components` make."""
    document = {"components": {"schemas": components.schemas}}
    resource = Resource(contents=document, specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(DOC, resource)
    return Draft202012Validator({"$ref": DOC + ref["$ref"]}, registry=registry)


@pytest.mark.parametrize("case", CASES)
def test_a_placed_schema_accepts_and_refuses_what_the_schema_does(case: str) -> None:
    schema, good, bad = CASES[case]
    before = copy.deepcopy(schema)
    components = Components(PREFIX, {"Fact": {"type": "object"}})
    placed = _placed(components, components.place(schema, "EchoTree"))
    if case not in DATA_REFS:
        validate({**OPENAPI, "components": {"schemas": components.schemas}})
    assert "description" not in components.schemas["EchoTree"]  # placed, not any value
    alone = validators.validator_for(schema, Draft202012Validator)(schema)
    for instance in good:
        assert alone.is_valid(instance)
        assert placed.is_valid(instance), instance
    for instance in bad:
        assert not alone.is_valid(instance)
        assert not placed.is_valid(instance), instance
    assert schema == before  # placing copies


def test_every_reference_names_a_component_and_anchors_and_ids_are_gone() -> None:
    schema = CASES["recursive through its root, a pointer into itself, an anchor"][0]
    components = Components(PREFIX, {})
    assert components.place(schema, "TreesChain") == {"$ref": f"{PREFIX}TreesChain"}
    assert components.schemas == {
        "TreesChain": {
            "type": "object",
            "required": ["value"],
            "properties": {
                "value": {"$ref": f"{PREFIX}TreesChainCount"},
                "twin": {"$ref": f"{PREFIX}TreesChain/properties/value"},
                "next": {"$ref": f"{PREFIX}TreesChain"},
            },
            "additionalProperties": False,
        },
        "TreesChainCount": {"type": "integer", "minimum": 1},
    }


def test_two_schemas_with_same_named_definitions_keep_their_own() -> None:
    def tree(kind: str) -> dict[str, Any]:
        return {"$ref": "#/$defs/node", "$defs": {"node": {"type": kind}}}

    components = Components(PREFIX, {"EchoTree": {"type": "null"}, "EchoTree3Node": {}})
    first = components.place(tree("string"), "EchoTree")
    second = components.place(tree("integer"), "EchoTree")
    assert first == {"$ref": f"{PREFIX}EchoTree2"}
    assert second == {"$ref": f"{PREFIX}EchoTree3"}
    assert components.schemas == {
        "EchoTree": {"type": "null"},
        "EchoTree2": {"$ref": f"{PREFIX}EchoTree2Node"},
        "EchoTree2Node": {"type": "string"},
        "EchoTree3": {"$ref": f"{PREFIX}EchoTree3Node2"},
        "EchoTree3Node": {},
        "EchoTree3Node2": {"type": "integer"},
    }
    assert _placed(components, first).is_valid("s")
    assert not _placed(components, second).is_valid("s")


def test_a_schema_placed_under_defs_refers_there() -> None:
    schema = CASES["recursive through $defs"][0]
    components = Components("#/$defs/", {})
    ref = components.place(schema, "EchoTree")
    whole = {**ref, "$defs": components.schemas}
    validator = Draft202012Validator(whole)
    assert validator.is_valid({"name": "a", "children": [{"name": "b"}]})
    assert not validator.is_valid({"name": "a", "children": [{}]})
    assert "components" not in str(whole)


@pytest.mark.parametrize(
    ("text", "name"),
    [("node_list", "NodeList"), ("nodeList", "NodeList"), ("my def", "MyDef"), ("ü-1", "1")],
)
def test_component_names_are_made_of_letters_and_digits(text: str, name: str) -> None:
    assert camel(text) == name


def _dynamic_tree() -> dict[str, Any]:
    """A tree whose nodes are, dynamically, the root's: every node needs a `tag`."""
    return {
        "$dynamicAnchor": "node",
        "$ref": "#/$defs/tree",
        "required": ["tag"],
        "$defs": {
            "tree": {
                "$id": "tree",
                "$dynamicAnchor": "node",
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}},
            }
        },
    }


def test_a_dynamically_resolved_reference_is_placed_as_any_value_saying_why() -> None:
    schema = _dynamic_tree()
    alone = jsonschema_rs.validator_for(schema)  # python-jsonschema misses the dynamic scope here
    components = Components(PREFIX, {})
    ref = components.place(schema, "EchoTree")
    assert components.schemas == {
        "EchoTree": {
            "description": "Any JSON value here: the key's own schema resolves $dynamicRef "
            "'#node' dynamically (its anchor is declared in more than one resource), which a "
            "schema placed in this document cannot express; facts are checked against the "
            "key's own schema when they are made."
        }
    }
    placed = _placed(components, ref)
    good = [{"tag": "a"}, {"tag": "a", "kids": [{"tag": "b", "kids": [{"tag": "c"}]}]}]
    bad = [{"tag": "a", "kids": [{"kids": [{"notag": 1}]}]}, {"kids": []}, 1]
    for instance in good:
        assert alone.is_valid(instance)
        assert placed.is_valid(instance)  # never less than the key's schema
    for instance in bad:
        assert not alone.is_valid(instance)
        assert placed.is_valid(instance)  # more, as its description says


def test_a_dynamic_anchor_declared_in_one_resource_only_is_still_placed_exactly() -> None:
    schema = _dynamic_tree()
    schema["$defs"]["tree"].pop("$id")  # one resource: `#node` is the root, statically
    del schema["$dynamicAnchor"]
    schema["$defs"]["tree"]["required"] = ["tag"]
    components = Components(PREFIX, {})
    placed = _placed(components, components.place(schema, "EchoTree"))
    assert "description" not in components.schemas["EchoTree"]
    assert not placed.is_valid({"tag": "a", "kids": [{"kids": [{"notag": 1}]}]})
    assert placed.is_valid({"tag": "a", "kids": [{"tag": "b", "kids": [{"tag": "c"}]}]})
