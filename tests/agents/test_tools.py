"""The agent tools' soft errors name what is wrong: the field's JSON pointer, or the JSON error."""

from __future__ import annotations

import pytest

from converge_dsl.agents._tools import ALL_TOOLS, ToolBox
from converge_dsl.engine.context import Context
from converge_dsl.engine.types import Provenance
from converge_dsl.models.port import ToolCallPart


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
