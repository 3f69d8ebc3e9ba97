"""An agent's `tool_choice` (every turn or the first only, on both wires), its check,
and the warnings of an agent that proposed nothing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import Recorder, Recording, compile_agents, fact, run, scripted

from converge_dsl import codes
from converge_dsl.agents._checks import agent_diagnostics
from converge_dsl.agents._kind import parse_agents
from converge_dsl.frontend import load_text
from converge_dsl.models._anthropic import AnthropicWire
from converge_dsl.models._openai import OpenAIWire
from converge_dsl.models._wire import ToolNames, WireSettings
from converge_dsl.models.port import Message, ModelRequest, ToolSpec

READ_TWICE_THEN_STOP = """
rules:
  - match: {turn: 0}
    tool_calls: [{name: context.read, input: {key: seeds}}]
  - match: {turn: 1}
    tool_calls: [{name: context.read, input: {key: seeds}}]
default: {reply: "nothing to add"}
"""


def agent(extra: str = "", script: str = READ_TWICE_THEN_STOP) -> tuple[Any, Recording]:
    model = Recording(scripted(script))
    yaml = f"""
  - name: rev
    kind: agent
    model: main
    target: evaluations
    goal: "Review the seeds"
    max_turns: 4
{extra}"""
    agents = compile_agents(yaml, {"main": model}, sink=Recorder())
    return agents["rev"], model


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("    tool_choice: required", ["required", "required", "required"]),
        (
            "    tool_choice: {choice: context.propose, turns: first}",
            ["context.propose", None, None],
        ),
        ("    tool_choice: {choice: auto, turns: every}", ["auto", "auto", "auto"]),
        ("", [None, None, None]),
    ],
)
def test_the_choice_rides_on_each_turns_request(extra: str, expected: list[str | None]) -> None:
    rev, model = agent(extra)
    run(rev, fact("seeds", "s1", "alpha"))
    assert [r.tool_choice for r in model.requests] == expected


def _request(choice: str) -> ModelRequest:
    tools = (ToolSpec("context.propose", "Propose", {"type": "object"}),)
    return ModelRequest("m", (Message.text("user", "hi"),), tools=tools, tool_choice=choice)


@pytest.mark.parametrize(
    ("choice", "openai", "anthropic"),
    [
        ("auto", "auto", {"type": "auto"}),
        ("required", "required", {"type": "any"}),
        (
            "context.propose",
            {"type": "function", "function": {"name": "context_propose"}},
            {"type": "tool", "name": "context_propose"},
        ),
    ],
)
def test_both_wires_send_the_choice(choice: str, openai: Any, anthropic: Any) -> None:
    req = _request(choice)
    names = ToolNames(req.tools)
    assert OpenAIWire().body(req, WireSettings("m"), names, False)["tool_choice"] == openai
    names = ToolNames(req.tools)
    assert AnthropicWire().body(req, WireSettings("m"), names, False)["tool_choice"] == anthropic


def _check(extra: str) -> list[Any]:
    from _harness import HEADER

    text = (
        HEADER
        + f"""suggestors:
  - name: rev
    kind: agent
    model: main
    target: evaluations
    goal: "Review"
{extra}"""
    )
    document = load_text(text, "p.yaml")
    found = agent_diagnostics(parse_agents(document.data), document.source_map)
    return [d for d in found if d.code == codes.AGENT_TOOL_CHOICE_UNAVAILABLE]


def test_a_choice_of_a_tool_the_agent_lacks_is_located() -> None:
    (found,) = _check("    tools: [context.read]\n    tool_choice: context.propose")
    assert "context.propose" in found.message
    assert (found.span.line, found.path) == (14, ("suggestors", 0, "tool_choice"))
    (nested,) = _check("    tools: [context.read]\n    tool_choice: {choice: finish}")
    assert nested.path == ("suggestors", 0, "tool_choice", "choice")
    assert _check("    tools: [context.read]\n    tool_choice: context.read") == []
    assert _check("    tool_choice: required") == []


def test_an_agent_that_never_proposes_gets_a_warning() -> None:
    rev, _ = agent()
    (warning,) = run(rev, fact("seeds", "s1", "alpha")).proposals
    assert (warning.key, warning.id) == ("diagnostic", "agent:no-proposal:rev:1")
    assert warning.data["code"] == codes.AGENT_NO_PROPOSAL
    assert "without proposing anything" in warning.content
    assert "tool_choice" in warning.content


def test_an_agent_whose_tool_calls_all_failed_gets_a_warning() -> None:
    script = "default:\n  tool_calls: [{name: context.nope, input: {}}]\n"
    rev, _ = agent(script=script)
    (warning,) = run(rev, fact("seeds", "s1", "alpha")).proposals
    assert warning.id == "agent:tool-errors:rev:1"
    assert warning.data["code"] == codes.AGENT_TOOL_ERRORS
    assert warning.data["tool_errors"] == 4
    assert "unknown tool 'context.nope'" in warning.content


def test_an_agent_that_proposed_gets_no_warning() -> None:
    script = """
rules:
  - match: {turn: 0}
    tool_calls: [{name: context.propose, input: {id: e1, content: fine, confidence: 0.9}}]
default: {reply: done}
"""
    rev, _ = agent(script=script)
    (proposal,) = run(rev, fact("seeds", "s1", "alpha")).proposals
    assert proposal.key == "evaluations"
