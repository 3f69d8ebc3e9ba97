"""`run --format json` against the fake provider: the budgets hold at the model port."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: port-budget
models:
  remote:
    adapter: openai
    base_url: "{url}"
    model: m
    accounts: [{{name: main, api_key_env: PORT_BUDGET_KEY}}]
    retries: 5
budget: {{max_model_calls: 1}}
seeds:
  - {{id: topic, content: "anything"}}
suggestors:
{suggestors}"""

LLM = """\
  - name: {name}
    kind: llm
    model: remote
    dependencies: [seeds]
    target: hypotheses
    prompt: {{user: "Say something about {{{{ facts.seeds[0].content }}}}"}}
    output: {{format: text, id: "{name}"}}
"""


def run_json(
    tmp_path: Path, server: FakeProviderServer, names: tuple[str, ...]
) -> tuple[int, dict[str, object]]:
    suggestors = "".join(LLM.format(name=name) for name in names)
    path = tmp_path / "p.yaml"
    path.write_text(
        PIPELINE.format(url=server.openai_base_url, suggestors=suggestors), encoding="utf-8"
    )
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", str(path), "--format", "json"], out, err)
    return code, json.loads(out.getvalue())


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT_BUDGET_KEY", "sk-port-budget")


def test_one_call_for_three_llm_suggestors_in_one_cycle(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        code, result = run_json(tmp_path, server, ("a", "b", "c"))
        requests = len(server.requests)
    assert requests == 1
    assert code == 4
    assert result["stop_reason"] == "model_call_budget_exhausted"


def test_one_call_with_five_retries_against_a_failing_server(tmp_path: Path) -> None:
    with FakeProviderServer() as server:
        server.reset(FakeReply(status=500))
        code, result = run_json(tmp_path, server, ("a",))
        requests = len(server.requests)
    assert requests == 1
    assert code == 4
    assert result["stop_reason"] == "model_call_budget_exhausted"
