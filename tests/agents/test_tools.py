"""The agent tools' soft errors name what is wrong: the field's JSON pointer, or the JSON error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from converge_dsl.agents._tools import ALL_TOOLS, ToolBox
from converge_dsl.engine.context import Context
from converge_dsl.engine.types import Provenance
from converge_dsl.models.port import ToolCallPart

sys.path.insert(0, str(Path(__file__).parent))
from _harness import Recording, compile_agents, run, scripted


def _one(call: ToolCallPart) -> tuple[str, bool]:
    box = ToolBox(ALL_TOOLS, Context.from_facts((), cycle=1), "evaluations", Provenance("a@t"))
    (result,) = box.run([call])
    assert not box.proposals
    return result.output, result.is_error


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"content": "x"}, "at /id: 'id' is a required property"),
        ({"id": "e", "content": "x", "confidence": 2}, "at /confidence: 2 is greater than"),
        ({"id": "e", "content": 5}, "at /content: 5 is not of type 'string', 'object'"),
        ({"id": "e", "content": "x", "idd": 1}, "at /idd: Additional properties"),
        ({"id": "e", "content": "x", "a/b~": 1}, "at /a~1b~0: Additional properties"),
    ],
)
def test_a_propose_that_fails_its_checks_names_the_field(
    given: dict[str, object], said: str
) -> None:
    output, is_error = _one(ToolCallPart("c", "context.propose", given))
    assert is_error
    assert output.startswith(f"invalid input for context.propose {said}")


def test_a_call_whose_arguments_could_not_be_read_is_a_soft_error_naming_the_problem() -> None:
    problem = "the arguments are not valid JSON: Expecting value: line 1 column 9 (char 8)"
    output, is_error = _one(ToolCallPart("c", "context.propose", {}, problem))
    assert is_error
    assert output == f"invalid call of context.propose: {problem}; call it again with the " + (
        "arguments as one JSON object"
    )


def test_an_unknown_tool_is_named_before_its_arguments() -> None:
    output, is_error = _one(ToolCallPart("c", "context.purpose", {}, "not JSON"))
    assert is_error
    assert output.startswith("unknown tool 'context.purpose'; did you mean 'context.propose'?")


_CORRECTED = """
rules:
  - match: {turn: 0}
    tool_calls: [{name: context.propose, input: {id: "notes/../e1", content: good}}]
  - match: {turn: 1}
    tool_calls: [{name: context.propose, input: {id: e1, content: good}}]
default: {tool_calls: [{name: finish, input: {}}]}
"""


def test_an_id_the_gate_would_refuse_is_a_tool_error_the_model_corrects() -> None:
    # The tool took the id; the gate refused the fact after the agent had finished, so
    # the model never heard why and the agent's one answer was lost.
    from converge_dsl.engine import PromotionGate, PromotionPolicy, ProposedFact

    model = Recording(scripted(_CORRECTED))
    agent = compile_agents(
        "  - {name: rev, kind: agent, model: main, target: evaluations, goal: Review}\n",
        {"main": model, "cheap": model},
    )["rev"]
    effect = run(agent)
    assert [(p.key, p.id) for p in effect.proposals] == [("evaluations", "e1")]
    refused = model.requests[1].messages[-1].parts[0]
    gate = PromotionGate(PromotionPolicy()).rejection(
        ProposedFact("evaluations", "notes/../e1", "good", 1.0, Provenance("rev@1"))
    )
    assert gate == "id 'notes/../e1' has '..' as a path segment (a folder up)"
    assert (refused.output, refused.is_error) == (f"{gate}; use another id", True)


@pytest.mark.parametrize("given", ["  ", "a\x00b", "a\u202eb"])
def test_every_id_the_gate_refuses_is_refused_by_the_tool(given: str) -> None:
    output, is_error = _one(ToolCallPart("c", "context.propose", {"id": given, "content": "x"}))
    assert is_error
    from converge_dsl._fact_ids import id_refusal

    assert output == f"{id_refusal(given)}; use another id"
