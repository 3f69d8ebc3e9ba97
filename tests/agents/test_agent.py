"""The turn loop driven by the scripted model: contributors, tools, compaction, failures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _harness import Recorder, Recording, compile_agents, fact, run, scripted, texts

from converge_dsl.agents import AgentError

READ_FOREVER = """
default:
  tool_calls: [{name: context.read, input: {key: seeds}}]
"""


def agent_yaml(extra: str = "", *, window: int = 8000, turns: int = 6) -> str:
    return f"""
  - name: rev
    kind: agent
    model: main
    target: evaluations
    goal: "Review the seeds"
    max_turns: {turns}
    context_window: {window}
{extra}"""


def build(
    extra: str = "", script: str = READ_FOREVER, **kw: int
) -> tuple[object, Recording, Recorder]:
    model = Recording(scripted(script))
    sink = Recorder()
    agents = compile_agents(agent_yaml(extra, **kw), {"main": model, "cheap": model}, sink=sink)
    return agents["rev"], model, sink


CONTRIBUTORS = """    contributors:
      - {name: every2, kind: reminder, every: 2, text: "R{{ turn }}: {{ goal }}"}
      - {name: seen, kind: facts, keys: [seeds], persist: false}
      - name: tmpl
        kind: template
        role: system
        persist: false
        template: "T{{ turn }} of {{ conversation | length }}"
"""


def test_contributors_fire_in_order_with_their_cadence() -> None:
    agent, model, sink = build(CONTRIBUTORS, turns=5)
    run(agent, fact("seeds", "s1", "alpha"))
    fired = [(e.turn, e.contributor) for e in sink.of("agent_contributor_fired")]
    assert fired == [
        (0, "seen"),
        (0, "tmpl"),
        (1, "tmpl"),
        (2, "every2"),
        (2, "tmpl"),
        (3, "tmpl"),
        (4, "every2"),
        (4, "tmpl"),
    ]
    # Registration order within a turn, ahead of the model call of that turn.
    turn2 = texts(model.requests[2])
    assert turn2[-2:] == ["R2: Review the seeds", "T2 of 5"]
    assert model.requests[0].messages[-1].role == "system"


def test_transient_messages_go_with_one_request_and_persisted_ones_stay() -> None:
    agent, model, _ = build(CONTRIBUTORS, turns=5)
    run(agent, fact("seeds", "s1", "alpha"))
    facts_text = "Facts (seeds):\n- seeds/s1: alpha"
    assert facts_text in texts(model.requests[0])
    assert all(facts_text not in texts(r) for r in model.requests[1:])
    assert "T0 of 1" not in texts(model.requests[1])
    # The persisted reminder of turn 2 is still in the history at turn 4.
    assert "R2: Review the seeds" in texts(model.requests[4])


def test_reminder_zero_is_disabled_and_turn_zero_skipped() -> None:
    extra = (
        "    contributors:\n"
        "      - {kind: reminder, every: 0, text: x}\n"
        "      - {kind: reminder, every: 1, text: again}\n"
    )
    agent, _, sink = build(extra, turns=3)
    run(agent)
    assert [(e.turn, e.contributor) for e in sink.of("agent_contributor_fired")] == [
        (1, "reminder-1"),
        (2, "reminder-1"),
    ]


def test_completed_answer_without_tool_call_ends_the_loop() -> None:
    script = """
rules:
  - match: {turn: 0}
    tool_calls: [{name: context.propose, input: {id: e1, content: good, confidence: 0.9}}]
default: {reply: all done}
"""
    agent, model, sink = build(script=script)
    effect = run(agent)
    assert [(p.key, p.id, p.content, p.confidence) for p in effect.proposals] == [
        ("evaluations", "e1", "good", 0.9)
    ]
    assert effect.proposals[0].provenance.source == "rev@t"
    assert len(model.requests) == 2
    assert sink.of("agent_finished")[0].status == "completed"


def test_finish_tool_and_max_turns() -> None:
    agent, _, sink = build(script="default: {tool_calls: [{name: finish, input: {}}]}")
    run(agent)
    assert (sink.of("agent_finished")[0].status, sink.of("agent_finished")[0].turns) == (
        "finished",
        1,
    )
    agent, model, sink = build(turns=3)
    run(agent)
    assert len(model.requests) == 3
    assert sink.of("agent_finished")[0].status == "max_turns"


def test_unknown_tool_and_bad_input_are_soft_errors() -> None:
    script = """
rules:
  - match: {turn: 0}
    tool_calls: [{name: context.reed, input: {key: seeds}}]
  - match: {turn: 1}
    tool_calls: [{name: context.propose, input: {id: e1, confidence: 3}}]
default: {reply: ok}
"""
    agent, model, sink = build(script=script)
    effect = run(agent)
    (warning,) = effect.proposals  # no proposal: the warning that every tool call failed
    assert (warning.key, warning.id) == ("diagnostic", "agent:tool-errors:rev:1")
    assert warning.data["code"] == "CD923"
    assert warning.data["tool_errors"] == 2
    first = model.requests[1].messages[-1].parts[0]
    assert first.is_error
    assert "unknown tool 'context.reed'; did you mean 'context.read'?" in first.output
    second = model.requests[2].messages[-1].parts[0]
    assert second.is_error
    assert second.output == (
        "invalid input for context.propose at /content: 'content' is a required property"
    )
    assert [e.is_error for e in sink.of("agent_tool_called")] == [True, True]


def test_model_error_is_hard_with_the_source_span() -> None:
    agent, _, _ = build(script="default: {error: {code: E_AUTH, message: bad key}}")
    with pytest.raises(AgentError) as caught:
        run(agent)
    assert caught.value.reason == "model_error"
    assert caught.value.suggestor == "rev"
    assert caught.value.cycle == 1
    assert caught.value.span is not None
    assert caught.value.span.file == "p.yaml"
    assert "E_AUTH" in str(caught.value)


def compactions(sink: Recorder) -> list[tuple[int, str, int, int]]:
    return [(c.turn, c.level, c.first_turn, c.last_turn) for c in sink.of("agent_compaction")]


def test_normal_compaction_at_threshold_clears_turns_older_than_keep_turns() -> None:
    agent, model, sink = build(window=700, turns=12)  # threshold 560, emergency 665
    run(agent, fact("seeds", "s1", "a" * 120))
    starts = {e.turn: e.estimated_tokens for e in sink.of("agent_turn_started")}
    # Default keep_turns (4) without a summarizer: turns older than 4 are cleared.
    assert compactions(sink) == [(6, "normal", 0, 1), (8, "normal", 2, 3), (10, "normal", 4, 5)]
    assert max(starts[t] for t in range(6)) < 560 <= starts[6]
    for event in sink.of("agent_compaction"):
        assert event.tokens_before == starts[event.turn] > event.tokens_after
    # The stub replaces the cleared turns in the very request of that turn.
    request = texts(model.requests[6])
    assert "[turns 0-1 cleared]" in request
    assert len(model.requests[6].messages) == len(model.requests[5].messages) + 2 - 4 + 1


def test_emergency_compaction_clears_all_but_the_last_turn() -> None:
    agent, _, sink = build(window=400, turns=8)  # threshold 320, emergency 380
    run(agent, fact("seeds", "s1", "a" * 120))
    # At 346 tokens (turn 2) a normal compaction finds no turn older than 4: deferred.
    assert compactions(sink) == [
        (3, "emergency", 0, 1),
        (5, "emergency", 2, 3),
        (7, "emergency", 4, 5),
    ]


def test_transient_message_counts_before_the_compaction_decision() -> None:
    big = (
        "    contributors:\n"
        "      - kind: template\n"
        "        persist: false\n"
        "        template: \"{{ 'z' * 360 if turn == 3 else '' }}\"\n"
    )
    agent, _, sink = build(big, window=400, turns=5)
    run(agent, fact("seeds", "s1", "a"))
    assert compactions(sink) == [(3, "emergency", 0, 1)]
    starts = {e.turn: e.estimated_tokens for e in sink.of("agent_turn_started")}
    assert starts[3] - starts[2] > 90 > starts[4] - starts[2]  # counted at turn 3 only
    agent, _, sink = build(window=400, turns=5)
    run(agent, fact("seeds", "s1", "a"))
    assert compactions(sink) == []


def test_no_progress_compaction_fails_with_context_exceeded() -> None:
    agent, _, sink = build(window=120, turns=4)
    with pytest.raises(AgentError) as caught:
        run(agent, fact("seeds", "s1", "b" * 400))
    assert caught.value.reason == "context_exceeded"
    assert "context_exceeded" in str(caught.value)
    assert "no turn left to clear" in str(caught.value)
    assert caught.value.span is not None
    assert caught.value.span.line > 1
    assert sink.of("agent_finished")[0].status == "context_exceeded"


def test_plan_contributor_re_emits_its_keys_every_turn() -> None:
    extra = (
        "    contributors:\n      - {kind: plan, keys: [strategies, constraints], role: system}\n"
    )
    agent, model, sink = build(extra, turns=3)
    run(agent, fact("strategies", "st1", "go north"), fact("constraints", "c1", "cheap"))
    assert [e.turn for e in sink.of("agent_contributor_fired")] == [0, 1, 2]
    plan = "Plan:\n- strategies/st1: go north\n- constraints/c1: cheap"
    assert texts(model.requests[2]).count(plan) == 3  # persisted: all three stay in the history
    agent, _, sink = build(extra, turns=2)
    run(agent)
    assert sink.of("agent_contributor_fired") == []  # nothing to re-emit


def test_a_model_that_never_finishes_is_named_when_its_stubs_fill_the_window() -> None:
    # The hint said only "raise context_window, ...": after hundreds of turns of a model
    # calling context.read over and over, a larger window only let it loop longer.
    agent, _, sink = build(window=400, turns=100_000)
    with pytest.raises(AgentError) as caught:
        run(agent, fact("seeds", "s1", "a" * 120))
    turns = sink.of("agent_finished")[0].turns
    cleared = len(sink.of("agent_compaction"))
    assert cleared > 1
    assert caught.value.message.startswith(f"context_exceeded at turn {turns - 1}: ")
    assert caught.value.hint.startswith(
        f"the model called tools for {turns - 1} turns without finishing, until what stands "
        f"for the {cleared} spans it cleared ("
    )
    assert caught.value.hint.endswith(
        "tokens) filled the window: lower max_turns (now 100000) or say in the goal when to "
        "call finish; or raise context_window"
    )


ONE_BIG_READ = """
rules:
  - match: {turn: 0}
    tool_calls: [{name: context.read, input: {key: seeds}}]
  - match: {turn: 1}
    tool_calls: [{name: context.read, input: {key: seeds}}]
  - match: {turn: 2}
    tool_calls: [{name: context.read, input: {key: signals}}]
default:
  tool_calls: [{name: context.read, input: {key: seeds}}]
"""


def test_one_big_tool_result_is_named_not_the_turn_limit() -> None:
    # One 30,000-character result after two small turns overflowed a 2,000-token window;
    # the hint blamed a looping model ("lower max_turns") and counted one turn too many.
    agent, _, _ = build(script=ONE_BIG_READ, window=2000, turns=50)
    with pytest.raises(AgentError) as caught:
        run(agent, fact("seeds", "s1", "a" * 50), fact("signals", "big", "z" * 30000))
    assert caught.value.message.startswith("context_exceeded at turn 3: ")
    hint = caught.value.hint or ""
    assert "max_turns" not in hint
    assert hint.startswith("turn 2 holds ")
    assert hint.endswith(
        " of the window's 2000 tokens, most of it the 30049-character result of "
        "context.read: have context.read return less, or raise context_window"
    )


def test_a_first_request_over_the_window_is_told_to_raise_it() -> None:
    agent, _, _ = build(window=120, turns=4)
    with pytest.raises(AgentError) as caught:
        run(agent, fact("seeds", "s1", "b" * 400))
    assert caught.value.hint == (
        "raise context_window, lower compaction.threshold, or clear turns sooner "
        "(summarizer.clear_turns_older_than)"
    )
