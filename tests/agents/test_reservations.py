"""An agent's model calls hold at the port: each attempt counts, a blocked retry is the budget."""

from __future__ import annotations

import asyncio
from pathlib import Path

from converge_dsl.clock import FakeClock
from converge_dsl.engine import StopReason
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.runtime import RunOptions, RunOutcome, run_pipeline

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: agent-reservations
models:
  remote:
    adapter: openai
    base_url: "{url}"
    model: m
    accounts: [{{name: main, api_key_env: TEST_KEY}}]
    retries: 5
budget: {budget}
seeds:
  - {{id: s1, key: strategies, content: "Strategy one"}}
suggestors:
  - name: reviewer
    kind: agent
    model: remote
    dependencies: [strategies]
    target: evaluations
    goal: Evaluate strategies.
    max_turns: 10
    context_window: 100000
"""


def run(tmp_path: Path, server: FakeProviderServer, budget: str) -> tuple[RunOutcome, int]:
    path = tmp_path / "agent.yaml"
    path.write_text(PIPELINE.format(url=server.openai_base_url, budget=budget), encoding="utf-8")
    options = RunOptions(pipeline=path, env={"TEST_KEY": "sk-test"}, clock=FakeClock())
    return asyncio.run(run_pipeline(options)), len(server.requests)


def test_an_agent_retry_past_the_call_budget_is_not_sent(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.reset(FakeReply(status=500))
        outcome, requests = run(tmp_path, server, "{max_model_calls: 1}")
    assert requests == 1
    assert outcome.result.stop_reason is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert outcome.exit_code == 4
    assert outcome.error is None


def test_an_agent_retry_blocked_by_the_deadline_is_the_time_budget(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.reset(FakeReply(status=500, retry_after="2"))
        outcome, requests = run(tmp_path, server, "{max_wall_s: 5}")
    assert requests == 3  # at 0, 2 and 4 s; the next would start past the deadline
    assert outcome.result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert outcome.exit_code == 4
    assert outcome.error is None
    assert outcome.result.usage.model_calls == 3
