"""An agent's per-run state (summary calls against `max_calls`) goes into checkpoints and back."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _harness import fact, run
from test_summarizer import build, outcomes

from converge_dsl.engine.budget import Budget, UsageMeter
from converge_dsl.runtime import StatefulSuggestor
from converge_dsl.runtime._suggestor_state import restore_states, stateful

CHEAP = "default: {reply: 'short'}"


def test_an_agent_reports_its_summary_calls_as_checkpoint_state() -> None:
    agent, _, _ = build(CHEAP, meter=UsageMeter(Budget()))
    assert isinstance(agent, StatefulSuggestor)
    assert agent.checkpoint_state() == {"summary_calls": 0}
    run(agent, fact("seeds", "s1", "a" * 120))
    assert agent.checkpoint_state() == {"summary_calls": 3}


def test_a_restored_agent_goes_on_counting_against_max_calls() -> None:
    """max_calls is 5: a run resumed after 5 summary calls may make no more."""
    fresh, _, sink = build(CHEAP, meter=UsageMeter(Budget()))
    restore_states([fresh], {"rev": {"summary_calls": 5}, "other": {"x": 1}})
    assert fresh.reducer.calls_made == 5
    run(fresh, fact("seeds", "s1", "a" * 120))
    assert {reason for _, reason in outcomes(sink)} == {"budget_exhausted"}
    assert fresh.checkpoint_state() == {"summary_calls": 5}


def test_only_stateful_suggestors_are_collected() -> None:
    agent, _, _ = build(CHEAP)

    class Plain:
        name = "plain"

    assert stateful([Plain(), agent]) == (agent,)  # type: ignore[list-item]
