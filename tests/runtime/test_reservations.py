"""Budgets hold at the model port: calls are reserved, every attempt counts, the deadline cancels.

Each test runs a pipeline against the project's fake provider on 127.0.0.1 and
checks the exact number of requests the server received, the stop reason and
the exit code.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from converge_dsl.clock import FakeClock, SystemClock
from converge_dsl.engine import StopReason
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.runtime import RunOptions, RunOutcome, run_pipeline

HEAD = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: reservations
models:
  remote:
    adapter: openai
    base_url: "{url}"
    model: m
    accounts: [{{name: main, api_key_env: TEST_KEY}}]
    retries: {retries}
budget: {budget}
seeds:
  - {{id: topic, content: "anything"}}
suggestors:
"""

LLM = """\
  - name: {name}
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "Say something about {{{{ facts.seeds[0].content }}}}"}}
    output: {{format: text, id: "{name}"}}
"""


def pipeline(
    tmp_path: Path, server: FakeProviderServer, *, budget: str, names: tuple[str, ...], retries: int
) -> Path:
    text = HEAD.format(url=server.openai_base_url, retries=retries, budget=budget)
    text += "".join(LLM.format(name=name) for name in names)
    path = tmp_path / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def options(path: Path, clock: FakeClock | SystemClock) -> RunOptions:
    return RunOptions(pipeline=path, env={"TEST_KEY": "sk-test"}, clock=clock)


def hypotheses(outcome: RunOutcome) -> tuple[str, ...]:
    return tuple(fact.id for fact in outcome.result.context.get("hypotheses"))


def test_one_call_budget_lets_one_of_three_concurrent_llm_calls_through(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        path = pipeline(
            tmp_path, server, budget="{max_model_calls: 1}", names=("a", "b", "c"), retries=0
        )
        outcome = asyncio.run(run_pipeline(options(path, FakeClock())))
        requests = len(server.requests)
    assert requests == 1
    assert outcome.result.stop_reason is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert outcome.exit_code == 4
    assert outcome.error is None
    assert outcome.result.usage.model_calls == 1
    assert hypotheses(outcome) == ("a",)  # the first registered suggestor reserved it


def test_concurrent_calls_in_flight_never_pass_the_call_budget(tmp_path: Path) -> None:
    names = tuple(f"s{index}" for index in range(10))
    with FakeProviderServer() as server:
        server.reset(FakeReply(delay_s=0.1))  # all the granted calls are in flight at once
        path = pipeline(tmp_path, server, budget="{max_model_calls: 4}", names=names, retries=0)
        outcome = asyncio.run(run_pipeline(options(path, FakeClock())))
        requests = len(server.requests)
    assert requests == 4
    assert outcome.result.usage.model_calls == 4
    assert outcome.result.stop_reason is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert hypotheses(outcome) == names[:4]


def test_failed_attempts_count_against_the_call_budget(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.reset(FakeReply(status=500))
        path = pipeline(tmp_path, server, budget="{max_model_calls: 1}", names=("a",), retries=5)
        outcome = asyncio.run(run_pipeline(options(path, FakeClock())))
        requests = len(server.requests)
    assert requests == 1
    assert outcome.result.stop_reason is StopReason.MODEL_CALL_BUDGET_EXHAUSTED
    assert outcome.exit_code == 4
    assert outcome.error is None
    assert outcome.result.usage.model_calls == 1
    assert hypotheses(outcome) == ()


def test_a_retry_counts_as_a_call(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.queue(FakeReply(status=500))
        path = pipeline(tmp_path, server, budget="{max_model_calls: 2}", names=("a",), retries=5)
        outcome = asyncio.run(run_pipeline(options(path, FakeClock())))
        requests = len(server.requests)
    assert requests == 2
    assert outcome.result.usage.model_calls == 2
    assert hypotheses(outcome) == ("a",)
    assert outcome.result.stop_reason is StopReason.CONVERGED  # two calls, none over


def test_the_deadline_cancels_a_call_in_flight_on_the_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()

    async def scenario(server: FakeProviderServer, path: Path) -> tuple[RunOutcome, float]:
        async def deadline_passes() -> float:
            while not server.requests:  # the call reached the server: 3 s go by
                await asyncio.sleep(0.01)
            clock.advance(3.0)
            return time.monotonic()

        passing = asyncio.ensure_future(deadline_passes())
        outcome = await run_pipeline(options(path, clock))
        return outcome, time.monotonic() - await passing

    with FakeProviderServer() as server:
        server.reset(FakeReply(delay_s=12.0))
        path = pipeline(tmp_path, server, budget="{max_wall_s: 3}", names=("a",), retries=0)
        outcome, real_lag = asyncio.run(scenario(server, path))
        requests = len(server.requests)
    assert requests == 1
    assert outcome.result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert outcome.exit_code == 4
    assert outcome.error is None
    assert clock.monotonic() == 3.0  # stopped at the deadline on the injected clock
    assert real_lag < 0.5
    assert hypotheses(outcome) == ()  # nothing kept from the cancelled call
    assert outcome.result.usage.model_calls == 1  # the call reached the server


def test_the_deadline_cancels_a_call_in_flight_in_real_time(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.reset(FakeReply(delay_s=12.0))
        path = pipeline(tmp_path, server, budget="{max_wall_s: 3}", names=("a",), retries=0)
        started = time.monotonic()
        outcome = asyncio.run(run_pipeline(options(path, SystemClock())))
        elapsed = time.monotonic() - started
        requests = len(server.requests)
    assert requests == 1
    assert outcome.result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert outcome.exit_code == 4
    # The deadline is 3 s after the run starts; loading and compiling come first (slack).
    assert 3.0 <= elapsed < 3.5 + 0.5
    assert hypotheses(outcome) == ()
