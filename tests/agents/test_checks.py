from __future__ import annotations

from converge_dsl.agents._checks import agent_diagnostics
from converge_dsl.agents._kind import parse_agents
from converge_dsl.frontend import load_text

BASE = """apiVersion: converge-dsl/v1
kind: Pipeline
name: t
models:
  main: {adapter: scripted, script: main.script.yaml}
suggestors:
  - name: rev
    kind: agent
    model: main
    target: evaluations
    goal: g
    max_turns: 5
"""


def found(extra: str) -> list[tuple[str, str, int, str]]:
    document = load_text(BASE + extra, "p.yaml")
    return [
        (d.code, d.severity.value, d.line, d.message)
        for d in agent_diagnostics(parse_agents(document.data), document.source_map)
    ]


def test_a_plain_agent_is_clean() -> None:
    assert found("") == []


def test_emergency_below_threshold() -> None:
    assert found("    compaction: {threshold: 0.9, emergency: 0.7}\n") == [
        ("CD410", "error", 13, "compaction.emergency 0.7 is below compaction.threshold 0.9")
    ]


def test_summarizer_budget_that_never_allows_a_call_shows_the_arithmetic() -> None:
    extra = """    summarizer:
      model: main
      clear_turns_older_than: 2
      budget: {max_calls: 2, max_input_chars: 1000, timeout_s: 5,
               expected_summary_bytes: 400, cost_floor_multiple: 4}
"""
    assert found(extra) == [
        (
            "CD420",
            "warning",
            16,
            "this summarizer can never be called: expected_summary_bytes 400 x "
            "cost_floor_multiple 4 = 1600 > max_input_chars 1000",
        )
    ]
    assert found(extra.replace("max_calls: 2", "max_calls: 0"))[0][3].endswith("max_calls is 0")


def test_cadences_that_never_happen() -> None:
    extra = """    contributors:
      - {kind: reminder, every: 5, text: r}
    summarizer:
      model: main
      clear_turns_older_than: 7
      budget: {max_calls: 2, max_input_chars: 9000, timeout_s: 5,
               expected_summary_bytes: 100, cost_floor_multiple: 2}
"""
    codes = [(code, line) for code, _, line, _ in found(extra)]
    assert codes == [("CD421", 14), ("CD422", 17)]


def test_agent_without_propose_tool() -> None:
    result = found("    tools: [context.read, finish]\n")
    assert [(c, s) for c, s, _, _ in result] == [("CD423", "warning")]
    assert "cannot propose facts" in result[0][3]
