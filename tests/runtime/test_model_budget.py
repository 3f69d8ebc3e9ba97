"""Provider retries are bounded by the run's wall-clock budget."""

from __future__ import annotations

import asyncio
from pathlib import Path

from converge_dsl.clock import FakeClock
from converge_dsl.engine import StopReason
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.runtime import RunOptions, run_pipeline

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: retry-budget
models:
  remote:
    adapter: openai
    base_url: "{url}"
    model: m
    accounts: [{{name: main, api_key_env: TEST_KEY}}]
    retries: 8
budget: {{max_wall_s: 5}}
seeds:
  - {{id: topic, content: "anything"}}
suggestors:
  - name: ask
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "Say something about {{{{ facts.seeds[0].content }}}}"}}
    output: {{format: text}}
"""


def _failing(server: FakeProviderServer, folder: Path) -> Path:
    """The pipeline, its model at `server`, which answers 500 with `Retry-After: 2`."""
    server.reset(FakeReply(status=500, retry_after="2"))
    pipeline = folder / "retry.yaml"
    pipeline.write_text(PIPELINE.format(url=server.openai_base_url), encoding="utf-8")
    return pipeline


def test_retries_stop_at_the_run_deadline(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        pipeline = _failing(server, tmp_path)
        options = RunOptions(pipeline=pipeline, env={"TEST_KEY": "sk-test"}, clock=FakeClock())
        outcome = asyncio.run(run_pipeline(options))
        attempts = len(server.requests)
    # The deadline blocking a retry is the time budget, not an error.
    assert outcome.error is None
    assert outcome.result.stop_reason is StopReason.TIME_BUDGET_EXHAUSTED
    assert outcome.exit_code == 4
    # Retry-After 2 s against a 5 s deadline: the first attempt and two retries fit,
    # and each attempt counts as a model call.
    assert attempts == 3
    assert outcome.result.usage.model_calls == 3
    assert not outcome.result.context.get("hypotheses")


def test_a_loaded_pipeline_stops_retries_at_the_same_deadline(tmp_path: Path) -> None:
    # `batch.load` builds its runs' models through the runtime's `model_builder` too.
    from converge_dsl.batch import load

    with FakeProviderServer() as server:
        loaded = load(_failing(server, tmp_path), env={"TEST_KEY": "sk-test"}, clock=FakeClock())
        document = loaded.run()
        attempts = len(server.requests)
    assert document.stop_reason == "time_budget_exhausted"
    assert attempts == 3
    assert document.usage.model_calls == 3
