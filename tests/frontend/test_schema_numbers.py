"""The schema stage and numbers: text lost in free-form data, values JSON cannot hold."""

from __future__ import annotations

import copy

from converge_dsl import codes
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.frontend import LoadedDocument, NodeLocation, SourceMap, load_text
from converge_dsl.frontend import schema_diagnostics as check
from converge_dsl.frontend._schema import _replaced

HEAD = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: numbers\n"
SCHEMA = "pipeline.v1.json"


def _found(body: str) -> list[tuple[str, str]]:
    doc = load_text(HEAD + body, "p.yaml")
    return [(d.code, ".".join(str(p) for p in d.path)) for d in check(doc, SCHEMA)]


def test_text_lost_where_the_schema_takes_anything() -> None:
    body = (
        "inputs:\n  v: {default: 1.10}\n"
        "seeds:\n  - {id: a, content: {release: 2.0, build: 2.50}, data: [0.30, 4]}\n"
    )
    assert _found(body) == [
        (codes.NUMBER_TEXT_LOST, "inputs.v.default"),
        (codes.NUMBER_TEXT_LOST, "seeds.0.content.build"),
        (codes.NUMBER_TEXT_LOST, "seeds.0.data.0"),
    ]


def test_no_text_lost_where_the_schema_wants_a_number() -> None:
    body = (
        "promotion: {min_confidence: 0.50}\n"
        "seeds:\n  - {id: a, content: b, confidence: 0.90}\n"
        "suggestors:\n"
        "  - name: r\n    kind: rule\n    dependencies: [seeds]\n    when: 'true'\n"
        "    emit: [{key: hypotheses, id: h, content: c, confidence: 0.70}]\n"
    )
    assert _found(body) == []


def test_where_the_schema_wants_text_the_schema_says_so_once() -> None:
    assert _found("packs:\n  optimization: 1.10\n") == [
        (codes.VERSION_AS_NUMBER, "packs.optimization")
    ]


def test_a_schema_error_elsewhere_does_not_hide_text_lost() -> None:
    found = _found("sugestors: []\ninputs:\n  v: {default: 1.10}\n")
    assert found == [
        (codes.UNKNOWN_FIELD, "sugestors"),
        (codes.NUMBER_TEXT_LOST, "inputs.v.default"),
    ]


def test_replaced_copies_only_the_containers_on_the_paths() -> None:
    data = {"a": {"b": [1.1, 2.2], "c": {"d": 1}}, "e": [3.3]}
    before = copy.deepcopy(data)
    out = _replaced(data, [("a", "b", 1), ("e", 0)])
    assert out == {"a": {"b": [1.1, []], "c": {"d": 1}}, "e": [[]]}
    assert data == before
    assert out["a"]["c"] is data["a"]["c"]


def test_a_value_of_the_right_type_json_cannot_hold_is_named() -> None:
    """Once 'must be a number, not a number'; now the value is named."""
    span = SourceSpan("p.yaml", 1, 1, 1, 2)
    data = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "n",
        "promotion": {"min_confidence": float("inf")},
    }
    doc = LoadedDocument("p.yaml", "", data, SourceMap("p.yaml", {(): NodeLocation(span)}))
    (found,) = check(doc, SCHEMA)
    assert found.code == codes.WRONG_TYPE
    assert "not a number" not in found.message
    assert found.message == (
        "promotion.min_confidence must be a number, not Infinity, which JSON cannot hold"
    )
