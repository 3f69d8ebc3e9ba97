"""llm answers become data: the item by default, `output.data` maps it, key schemas shape it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from converge_dsl.engine import (
    Context,
    Fact,
    PromotionGate,
    PromotionPolicy,
    PromotionRecord,
    ProposedFact,
    Provenance,
)

Compile = Callable[..., Any]  # the `compile_yaml` fixture of conftest.py

KEYS = """\
keys:
  - name: tickets
    schema:
      type: object
      required: [category]
      properties: {category: {enum: [billing, bug]}}
"""
BODY = """\
models: {m: {adapter: scripted, script: s.yaml}}
suggestors:
  - name: classify
    kind: llm
    model: m
    dependencies: [seeds]
    target: tickets
    prompt: {user: "Classify {{ facts.seeds[0].content }}"}
"""


def _compile(compile_yaml: Compile, model: Any, output: str, keys: str = KEYS) -> Any:
    return compile_yaml(keys + BODY + output, models={"m": model}).suggestors[0]


def _execute(suggestor: Any) -> tuple[ProposedFact, ...]:
    seed = Fact("seeds", "t", "tea", Provenance("s@t"), 1.0, PromotionRecord("s", "p", 0))
    effect = asyncio.run(suggestor.execute(Context.from_facts([seed], cycle=1)))
    return tuple(effect.proposals)


def test_a_json_item_is_the_data_and_its_canonical_text_the_content(
    compile_yaml: Compile, fake_model: Any
) -> None:
    answer = '[{"category": "bug", "note": "é"}, {"category": "billing"}]'
    suggestor = _compile(compile_yaml, fake_model(answer), "    output: {format: json}\n")
    first, second = _execute(suggestor)
    assert first.content == '{"category":"bug","note":"é"}'
    assert first.data == {"category": "bug", "note": "é"}
    assert (second.id, second.data) == ("classify-1", {"category": "billing"})


def test_templates_see_the_item_as_data_and_output_data_maps_it(
    compile_yaml: Compile, fake_model: Any
) -> None:
    output = """\
    output:
      format: json
      id: "t-{{ item.category }}"
      content: "{{ item['category'] | upper }}"
      data: "{'category': item.category, 'index': index}"
"""
    suggestor = _compile(compile_yaml, fake_model('{"category": "bug"}'), output)
    (proposal,) = _execute(suggestor)
    assert (proposal.id, proposal.content) == ("t-bug", "BUG")
    assert proposal.data == {"category": "bug", "index": 0}
    assert suggestor.response_schema is None  # output.data: the item is not the data


def test_text_and_lines_answers_have_no_data_unless_mapped(
    compile_yaml: Compile, fake_model: Any
) -> None:
    lines = _compile(compile_yaml, fake_model("a\nb"), "    output: {format: lines}\n", keys="")
    assert [(p.content, p.data) for p in _execute(lines)] == [("a", None), ("b", None)]
    mapped = "    output: {format: lines, data: \"{'line': item, 'n': index}\"}\n"
    suggestor = _compile(compile_yaml, fake_model("a"), mapped, keys="")
    assert [p.data for p in _execute(suggestor)] == [{"line": "a", "n": 0}]


def test_items_are_checked_against_the_target_keys_schema(
    compile_yaml: Compile, fake_model: Any
) -> None:
    answer = '[{"category": "bug"}, {"category": "refund"}]'
    suggestor = _compile(compile_yaml, fake_model(answer), "    output: {format: json}\n")
    assert suggestor.response_schema == {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["category"],
            "properties": {"category": {"enum": ["billing", "bug"]}},
        },
    }
    (diagnostic,) = _execute(suggestor)
    assert (diagnostic.key, diagnostic.id) == ("diagnostic", "llm:invalid-output:classify:1")
    assert diagnostic.data["error"] == (
        "answer item 1 does not match the schema of key 'tickets' at category: "
        "'refund' is not one of ['billing', 'bug']"
    )


def test_output_schema_wins_over_the_key_schema(compile_yaml: Compile, fake_model: Any) -> None:
    output = "    output: {format: json, schema: {type: array}}\n"
    suggestor = _compile(compile_yaml, fake_model('[{"category": "refund"}]'), output)
    assert suggestor.response_schema == {"type": "array"}
    (proposal,) = _execute(suggestor)  # the gate, not the suggestor, checks the key schema
    assert proposal.data == {"category": "refund"}
    assert suggestor.model.requests[0].response_schema == {"type": "array"}  # type: ignore[attr-defined]


def test_only_json_answers_ask_the_model_for_a_shape(
    compile_yaml: Compile, fake_model: Any
) -> None:
    output = "    output: {format: lines, schema: {type: array}}\n"
    suggestor = _compile(compile_yaml, fake_model("a"), output)
    _execute(suggestor)
    assert suggestor.model.requests[0].response_schema is None  # type: ignore[attr-defined]


def test_nan_in_an_answer_is_not_json(compile_yaml: Compile, fake_model: Any) -> None:
    suggestor = _compile(compile_yaml, fake_model('[{"x": NaN}]'), "    output: {format: json}\n")
    (diagnostic,) = _execute(suggestor)
    assert "answer is not JSON: NaN is not standard JSON" in diagnostic.data["error"]


def test_a_lone_surrogate_in_an_answer_is_not_json(compile_yaml: Compile, fake_model: Any) -> None:
    # No trace, result document or terminal could write it: refused where it comes in.
    answer = '[{"x": "ok"}, {"x": "T-101\\ud800"}]'
    suggestor = _compile(compile_yaml, fake_model(answer), "    output: {format: json}\n")
    (diagnostic,) = _execute(suggestor)
    assert diagnostic.data["error"] == (
        "answer is not JSON: the text at /1/x holds a lone surrogate (U+D800), which is not "
        "Unicode text"
    )


def test_the_derived_response_schema_keeps_the_key_schemas_references(
    compile_yaml: Compile, fake_model: Any
) -> None:
    keys = """\
keys:
  - name: tickets
    schema:
      $defs: {category: {enum: [billing, bug]}}
      type: object
      properties: {category: {$ref: "#/$defs/category"}}
"""
    output = "    output: {format: json}\n"
    suggestor = _compile(compile_yaml, fake_model('[{"category": "bug"}]'), output, keys=keys)
    assert suggestor.response_schema == {
        "type": "array",
        "items": {"type": "object", "properties": {"category": {"$ref": "#/$defs/category"}}},
        "$defs": {"category": {"enum": ["billing", "bug"]}},
    }
    import jsonschema

    jsonschema.Draft202012Validator(dict(suggestor.response_schema)).validate([{"category": "bug"}])


def test_items_checked_against_the_key_schema_carry_that_evidence_to_the_gate(
    compile_yaml: Compile, fake_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = '[{"category": "bug"}]'
    (checked,) = _execute(
        _compile(compile_yaml, fake_model(answer), "    output: {format: json}\n")
    )
    gate = PromotionGate(
        PromotionPolicy(
            key_schemas={
                "tickets": {
                    "required": ["category"],
                    "type": "object",
                    "properties": {"category": {"enum": ["billing", "bug"]}},
                }
            }
        )
    )
    assert checked.checked is not None
    assert gate.rejection(checked) is None
    mapped = "    output: {format: json, data: \"{'category': item.category}\"}\n"
    suggestor = _compile(compile_yaml, fake_model(answer), mapped)
    evidence = checked.checked
    judged = type(suggestor.mapping).judged

    def vouched_for(mapping: Any, text: str) -> list[tuple[Any, object]]:
        return [(item, evidence) for item, _ in judged(mapping, text)]

    monkeypatch.setattr(type(suggestor.mapping), "judged", vouched_for)
    (unchecked,) = _execute(suggestor)
    assert unchecked.data == {"category": "bug"}
    assert unchecked.checked is None  # its data is made from the item, not the item checked
