"""A whole run: an llm suggestor's output schema reaches the provider, and its answer is promoted.

Both wire formats, against the project's loopback server: the OpenAI-compatible
model sends the schema as `response_format`, the Anthropic one as a forced tool
whose input becomes the answer.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.runtime import RunOptions, run_pipeline

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: shaped
models:
  remote:
    adapter: {adapter}
    base_url: "{url}"
    model: m
    accounts: [{{name: main, api_key_env: TEST_KEY}}]
    {extra}
seeds:
  - {{id: market, content: tea}}
suggestors:
  - name: scan
    kind: llm
    model: remote
    dependencies: [seeds]
    target: competitors
    prompt: {{user: "List competitors of {{{{ facts.seeds[0].content }}}}"}}
    output:
      format: json
      schema: {{type: array, items: {{type: object, required: [name]}}}}
      id: "c-{{{{ index }}}}"
      content: "{{{{ item.name }}}}"
"""
SCHEMA = {"type": "array", "items": {"type": "object", "required": ["name"]}}
WRAPPED = {  # json_schema mode wants an object: the array is its one property
    "type": "object",
    "properties": {"answer": SCHEMA},
    "required": ["answer"],
    "additionalProperties": False,
}
LAX = {"strict": False}  # the schema leaves objects open: strict mode would refuse it
ITEMS = [{"name": "Lipton"}, {"name": "Twinings"}]


def run(server: FakeProviderServer, tmp_path: Path, adapter: str, extra: str = "") -> list[str]:
    url = server.openai_base_url if adapter == "openai" else server.url
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE.format(adapter=adapter, url=url, extra=extra), encoding="utf-8")
    options = RunOptions(pipeline=pipeline, env={"TEST_KEY": "sk-test"}, clock=FakeClock())
    outcome = asyncio.run(run_pipeline(options))
    assert outcome.error is None
    assert outcome.result.stop_reason == "converged"
    return [f.content for f in outcome.result.context.facts() if f.key == "competitors"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("", {"type": "json_schema", "json_schema": {"name": "answer", "schema": WRAPPED, **LAX}}),
        ("structured_output: json_object", {"type": "json_object", "schema": SCHEMA}),
    ],
)
def test_openai_run_sends_the_output_schema(
    server: FakeProviderServer, tmp_path: Path, extra: str, expected: object
) -> None:
    server.reset(FakeReply(text=json.dumps(ITEMS)))
    assert run(server, tmp_path, "openai", extra) == ["Lipton", "Twinings"]
    assert server.requests[0].body["response_format"] == expected


def test_anthropic_run_takes_the_forced_tools_input_as_the_answer(
    server: FakeProviderServer, tmp_path: Path
) -> None:
    server.reset(FakeReply(text="", tool_calls=(("answer", {"answer": ITEMS}),)))
    assert run(server, tmp_path, "anthropic") == ["Lipton", "Twinings"]
    body = server.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "answer"}
    assert body["tools"][0]["input_schema"]["properties"]["answer"] == SCHEMA


OFF_SCHEMA_SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {contains: tea}
    reply: '[{"title": "Twinings"}]'
    off_schema: true
default: {reply: "sorry, no idea", off_schema: true}
"""


@pytest.mark.parametrize(
    ("seed", "reason"),
    [
        ("tea", "answer does not match output.schema at 0: 'name' is a required property"),
        ("coffee", "answer is not JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_an_off_schema_scripted_answer_becomes_a_diagnostic_fact_offline(
    tmp_path: Path, seed: str, reason: str
) -> None:
    pipeline = tmp_path / "p.yaml"
    text = PIPELINE.format(adapter="scripted", url="", extra="")
    text = text.replace('base_url: ""\n    model: m\n', "script: p.script.yaml\n")
    text = text.replace("    accounts: [{name: main, api_key_env: TEST_KEY}]\n", "")
    pipeline.write_text(text.replace("content: tea", f"content: {seed}"), encoding="utf-8")
    (tmp_path / "p.script.yaml").write_text(OFF_SCHEMA_SCRIPT, encoding="utf-8")
    outcome = asyncio.run(run_pipeline(RunOptions(pipeline=pipeline, clock=FakeClock())))
    assert outcome.error is None
    assert outcome.result.stop_reason == "converged"
    facts = {f.id: f for f in outcome.result.context.facts() if f.key != "seeds"}
    assert list(facts) == ["llm:invalid-output:scan:1"]
    assert facts["llm:invalid-output:scan:1"].data["error"] == reason
