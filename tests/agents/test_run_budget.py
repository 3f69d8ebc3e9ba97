"""An agent under the run's budget: every model call is gated (calls, tokens, wall clock),
and a refused call stops the run with the matching reason, never `converged`."""

from __future__ import annotations

import asyncio

import pytest
from _harness import HEADER, Recorder, scripted

from converge_dsl.compiler import compile_pipeline
from converge_dsl.engine import Budget, Engine, StopReason
from converge_dsl.engine.testing import TickClock
from converge_dsl.frontend import load_text
from converge_dsl.runtime import SUGGESTOR_KINDS

LOOPING = """rules:
  - match: {}
    tool_calls: [{name: context.read, input: {key: strategies}}]
default: {reply: "Done."}
"""

AGENT = """seeds:
  - {id: s1, key: strategies, content: "Strategy one"}
suggestors:
  - name: reviewer
    kind: agent
    model: main
    dependencies: [strategies]
    target: evaluations
    goal: Evaluate strategies.
    max_turns: 100000000
    context_window: 100000
"""


@pytest.mark.parametrize(
    ("budget", "reason"),
    [
        (Budget(max_model_calls=50), StopReason.MODEL_CALL_BUDGET_EXHAUSTED),
        (Budget(max_tokens=5_000), StopReason.TOKEN_BUDGET_EXHAUSTED),
        (Budget(max_wall_s=60), StopReason.TIME_BUDGET_EXHAUSTED),
    ],
)
def test_a_looping_agent_stops_the_run_with_the_budget_reason(
    budget: Budget, reason: StopReason
) -> None:
    models = {"main": scripted(LOOPING), "cheap": scripted(LOOPING, "cheap.script.yaml")}
    sink = Recorder()
    engine = Engine(budget=budget, clock=TickClock(), events=sink)
    compiled = compile_pipeline(
        load_text(HEADER + AGENT, "p.yaml"),
        inputs={},
        models=models,
        usage=engine.usage,
        events=sink,
        kinds=SUGGESTOR_KINDS,
    )
    engine.register_all(compiled.suggestors)
    result = asyncio.run(engine.run(compiled.seeds))
    assert result.stop_reason is reason
    finished = sink.of("agent_finished")
    assert [f.status for f in finished] == ["budget_exhausted"]
    assert 0 < finished[0].turns < 1_000
    assert 0 < result.usage.model_calls <= 60
