"""The llm suggestor: prompts, output formats, the JSON-output contract, usage, provenance."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from converge_dsl.engine import Context, Fact, PromotionRecord, ProposedFact, Provenance
from converge_dsl.errors import PipelineInvalid
from converge_dsl.models import Message, ModelRequest, ModelReturn, ToolCallPart, Usage

Compile = Callable[..., Any]  # the `compile_yaml` fixture of conftest.py

BODY = """\
models: {m: {adapter: scripted, script: s.yaml}}
suggestors:
  - name: scan
    kind: llm
    model: m
    dependencies: [seeds]
    target: competitors
    prompt: {system: "You are terse.", user: "Competitors of {{ facts.seeds[0].content }}?"}
"""

JSON_OUTPUT = """\
    output:
      format: json
      schema: {type: array, items: {type: object, required: [name]}}
      id: "c-{{ index }}"
      content: "{{ item.name }}"
      confidence: 0.9
"""


def _execute(compile_yaml: Compile, model: Any, output: str) -> tuple[ProposedFact, ...]:
    compiled = compile_yaml(BODY + output, models={"m": model})
    seed = Fact(
        "seeds", "m", "tea", Provenance("seeds@t"), 1.0, PromotionRecord("seed", "pipeline", 0)
    )
    effect = asyncio.run(compiled.suggestors[0].execute(Context.from_facts([seed], cycle=1)))
    proposals: tuple[ProposedFact, ...] = effect.proposals
    return proposals


def test_conforming_json_answer_becomes_proposals(
    compile_yaml: Compile, fake_model: Any, usage: Any
) -> None:
    model = fake_model('```json\n[{"name": "Lipton"}, {"name": "Twinings"}]\n```')
    proposals = _execute(compile_yaml, model, JSON_OUTPUT)
    assert [(p.key, p.id, p.content, p.confidence) for p in proposals] == [
        ("competitors", "c-0", "Lipton", 0.9),
        ("competitors", "c-1", "Twinings", 0.9),
    ]
    assert proposals[0].provenance == Provenance("scan@t", "fake-1", "main")
    (request,) = model.requests
    assert request.system == ("You are terse.",)
    assert request.messages[0].text_content == "Competitors of tea?"
    assert request.suggestor == "scan"
    assert usage.calls == [(1, 3, 5)]


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ('[{"title": "Lipton"}]', "does not match output.schema at 0: 'name' is a required"),
        ("sorry, no idea", "answer is not JSON"),
        ("42", "at <root>: 42 is not of type 'array'"),
    ],
)
def test_non_conforming_answer_becomes_one_diagnostic(
    compile_yaml: Compile, fake_model: Any, answer: str, error: str
) -> None:
    (proposal,) = _execute(compile_yaml, fake_model(answer), JSON_OUTPUT)
    assert (proposal.key, proposal.id) == ("diagnostic", "llm:invalid-output:scan:1")
    assert isinstance(proposal.data, dict)
    assert error in proposal.data["error"]
    assert proposal.data["suggestor"] == "scan"


class _ToolCallsOnly:
    """A model whose answer holds two tool calls and no text."""

    def model_id(self) -> str:
        return "fake-1"

    async def call(self, request: ModelRequest) -> ModelReturn:
        calls = (ToolCallPart("c1", "context.read", {}), ToolCallPart("c2", "web.search", {}))
        return ModelReturn(Message("assistant", calls), Usage(3, 5), model_id="fake-1")

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("output", [JSON_OUTPUT, "", "    output: {format: lines}\n"])
def test_an_answer_of_only_tool_calls_becomes_one_diagnostic(
    compile_yaml: Compile, output: str
) -> None:
    (proposal,) = _execute(compile_yaml, _ToolCallsOnly(), output)
    assert (proposal.key, proposal.id) == ("diagnostic", "llm:invalid-output:scan:1")
    assert isinstance(proposal.data, dict)
    assert proposal.data["error"] == (
        "the answer holds only tool calls (context.read, web.search), no text"
    )


def test_one_json_object_is_one_item_and_a_scalar_is_refused(
    compile_yaml: Compile, fake_model: Any
) -> None:
    output = "    output: {format: json, id: 'c-{{ index }}', content: '{{ item.name }}'}\n"
    (proposal,) = _execute(compile_yaml, fake_model('{"name": "Lipton"}'), output)
    assert (proposal.id, proposal.content) == ("c-0", "Lipton")
    (diagnostic,) = _execute(compile_yaml, fake_model("42"), output)
    assert isinstance(diagnostic.data, dict)
    assert "a JSON int, not an array or object" in diagnostic.data["error"]


def test_lines_and_text_formats(compile_yaml: Compile, fake_model: Any) -> None:
    lines = _execute(compile_yaml, fake_model("a\n\n b \n"), "    output: {format: lines}\n")
    assert [(p.id, p.content, p.confidence) for p in lines] == [
        ("scan-0", "a", 0.7),
        ("scan-1", "b", 0.7),
    ]
    text = _execute(compile_yaml, fake_model(" whole answer \n"), "")
    assert [(p.id, p.content) for p in text] == [("scan-0", "whole answer")]


def test_invalid_output_schema_is_cd604(compile_yaml: Compile, fake_model: Any) -> None:
    output = "    output: {format: json, schema: {type: 12}}\n"
    with pytest.raises(PipelineInvalid) as caught:
        compile_yaml(BODY + output, models={"m": fake_model("")})
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == "CD604"
    assert (diagnostic.line, diagnostic.column) == (12, 36)


def test_the_output_schema_is_checked_for_safety_once(
    compile_yaml: Compile, fake_model: Any, schema_safety_checks: list[Any]
) -> None:
    checked = schema_safety_checks
    unique = f"checked once {id(checked)}"  # a text no test built a validator for
    output = f"    output: {{format: json, schema: {{type: array, description: '{unique}'}}}}\n"
    compile_yaml(BODY + output, models={"m": fake_model("")})
    assert [schema["description"] for schema in checked].count(unique) == 1


def test_unknown_model_is_cd603(compile_yaml: Compile) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        compile_yaml(BODY, models={})
    assert caught.value.diagnostics[0].code == "CD603"


def test_for_run_keeps_every_field_but_the_runs_model_and_meter(
    compile_yaml: Compile, fake_model: Any
) -> None:
    import dataclasses

    from converge_dsl.compiler._context import RunParts

    compiled = compile_yaml(BODY + JSON_OUTPUT, models={"m": fake_model("[]")})
    suggestor = compiled.suggestors[0]
    other_model, other_usage = fake_model("[]"), object()
    moved = suggestor.for_run(RunParts(models={"m": other_model}, usage=other_usage))
    assert moved == dataclasses.replace(suggestor, model=other_model, usage=other_usage)
    assert moved.model is other_model
    assert moved.usage is other_usage
