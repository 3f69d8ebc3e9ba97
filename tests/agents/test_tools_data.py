"""The agent tools and fact data: `context.propose` takes data, `context.read` returns it."""

from __future__ import annotations

import json

from converge_dsl.agents._tools import ALL_TOOLS, TOOL_SPECS, ToolBox
from converge_dsl.engine.context import Context
from converge_dsl.engine.types import Fact, PromotionRecord, Provenance
from converge_dsl.models.port import ToolCallPart


def _box(*facts: Fact) -> ToolBox:
    return ToolBox(ALL_TOOLS, Context.from_facts(facts, cycle=1), "evaluations", Provenance("a@t"))


def _fact(fid: str, content: str, data: object = None) -> Fact:
    return Fact(
        "seeds", fid, content, Provenance("seeds@t"), 1.0, PromotionRecord("g", "auto", 0), data
    )


def test_propose_takes_optional_json_data() -> None:
    box = _box()
    (result,) = box.run(
        [
            ToolCallPart(
                "c1",
                "context.propose",
                {"id": "e1", "content": "billing, urgent", "data": {"queue": "billing", "u": 2}},
            )
        ]
    )
    assert (result.output, result.is_error) == ("proposed evaluations/e1", False)
    (proposal,) = box.proposals
    assert (proposal.content, proposal.data) == ("billing, urgent", {"queue": "billing", "u": 2})


def test_propose_without_data_and_with_an_object_content() -> None:
    box = _box()
    box.run(
        [
            ToolCallPart("c1", "context.propose", {"id": "e1", "content": "plain"}),
            ToolCallPart("c2", "context.propose", {"id": "e2", "content": {"b": 1, "a": [2]}}),
        ]
    )
    plain, legacy = box.proposals
    assert (plain.content, plain.data) == ("plain", None)
    # an object content (legacy) becomes the data, with its canonical JSON as text
    assert (legacy.content, legacy.data) == ('{"a":[2],"b":1}', {"b": 1, "a": (2,)})


def test_same_id_same_data_is_acknowledged_other_data_is_an_error() -> None:
    box = _box()
    call = {"id": "e1", "content": "x", "data": [1, 2]}
    first, again, other = box.run(
        [
            ToolCallPart("c1", "context.propose", call),
            ToolCallPart("c2", "context.propose", call),
            ToolCallPart("c3", "context.propose", {**call, "data": [1, 3]}),
        ]
    )
    assert not first.is_error
    assert (again.output, again.is_error) == ("already proposed 'e1'", False)
    assert other.is_error
    assert "already proposed with other content or data" in other.output
    assert len(box.proposals) == 1


def test_read_returns_each_facts_data_when_it_has_some() -> None:
    box = _box(_fact("a", "alpha", {"category": "billing", "tags": ["x"]}), _fact("b", "beta"))
    (result,) = box.run([ToolCallPart("c1", "context.read", {"key": "seeds"})])
    assert json.loads(result.output) == [
        {
            "id": "a",
            "content": "alpha",
            "data": {"category": "billing", "tags": ["x"]},
            "confidence": 1.0,
        },
        {"id": "b", "content": "beta", "confidence": 1.0},
    ]


def test_the_propose_spec_declares_data() -> None:
    schema = TOOL_SPECS["context.propose"].input_schema
    assert "data" in schema["properties"]
    assert schema["required"] == ["id", "content"]
