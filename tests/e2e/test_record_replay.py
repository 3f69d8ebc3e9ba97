"""Record then replay gives the same run: every example pipeline, and an agent over HTTP.

`run --format json` of a replay is byte-identical to that of the recorded run,
facts' `model_id` and `account` included (issue 12, item 3).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    p
    for p in (ROOT / "pipelines").glob("*.yaml")
    if ".script." not in p.name and ".test." not in p.name
)


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def record_then_replay(pipeline: Path, cassette: Path) -> tuple[str, str]:
    """The json output of the recorded run and of its replay."""
    code, recorded, err = cli("run", pipeline, "--format", "json", "--record", cassette)
    assert cassette.read_text(encoding="utf-8"), err
    replay_code, replayed, replay_err = cli(
        "run", pipeline, "--format", "json", "--replay", cassette
    )
    assert replay_code == code, replay_err
    return recorded, replayed


def test_examples_are_found() -> None:
    assert len(EXAMPLES) >= 6
    assert any(p.name == "agent-review.yaml" for p in EXAMPLES)


@pytest.mark.parametrize("pipeline", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_replays_byte_identically(pipeline: Path, tmp_path: Path) -> None:
    recorded, replayed = record_then_replay(pipeline, tmp_path / "run.cassette.jsonl")
    assert replayed == recorded
    facts = [f for fs in json.loads(recorded)["facts"].values() for f in fs]
    assert not any(
        str(f.get("provenance", {}).get("model_id")).startswith("replay:") for f in facts
    )


AGENT = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: http-agent
models:
  remote:
    adapter: openai
    base_url: {base_url}
    model: fake-model
    accounts: [{{name: main, api_key_env: G3_MAIN_KEY}}]
seeds:
  - {{id: nordics, key: strategies, content: "Enter the Nordic market"}}
suggestors:
  - name: reviewer
    kind: agent
    model: remote
    dependencies: [strategies]
    target: evaluations
    goal: Evaluate the strategy.
    max_turns: 4
    tools: [context.read, context.propose, finish]
  - name: critic
    kind: llm
    model: remote
    dependencies: [evaluations]
    target: hypotheses
    prompt: {{user: "Criticise {{{{ count('evaluations') }}}} evaluations."}}
    output: {{format: text, id: critique}}
"""

KEY = "sk-g3-secret-0123456789abcdef"


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def test_an_agent_run_over_http_replays_byte_identically(
    server: FakeProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("G3_MAIN_KEY", KEY)
    pipeline = tmp_path / "agent.yaml"
    pipeline.write_text(AGENT.format(base_url=server.openai_base_url), encoding="utf-8")
    propose = {"id": "e1", "content": "Bearer upstream-not-secret: feasible", "confidence": 0.9}
    server.reset(FakeReply(text="Bearer upstream-not-secret"))
    server.queue(
        FakeReply(text="", tool_calls=(("context.read", {"key": "strategies"}),)),
        FakeReply(text="", tool_calls=(("context.propose", propose),)),
        FakeReply(text="Done."),
    )
    cassette = tmp_path / "agent.cassette.jsonl"
    recorded, replayed = record_then_replay(pipeline, cassette)
    seen = len(server.requests)
    assert seen >= 4
    assert replayed == recorded
    assert len(server.requests) == seen  # the replay never reached the server
    text = cassette.read_text(encoding="utf-8")
    assert KEY not in text
    assert "Bearer upstream-not-secret" in text
    facts = json.loads(recorded)["facts"]
    (evaluation,) = facts["evaluations"]
    assert evaluation["content"] == propose["content"]
    assert evaluation["provenance"]["model_id"] == "openai:fake-model"
    (critique,) = facts["hypotheses"]
    assert critique["content"] == "Bearer upstream-not-secret"
    assert critique["provenance"] == {
        "source": "critic@http-agent",
        "model_id": "openai:fake-model",
        "account": "main",
    }


CRITIC_SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {reply: "Both evaluations hold up."}
"""

CRITIC = """\
  - name: critic
    kind: llm
    model: critic
    dependencies: [evaluations]
    when: "count('evaluations') >= 2 and not has('hypotheses')"
    target: hypotheses
    prompt: {user: "Criticise {{ count('evaluations') }} evaluations."}
    output: {format: text, id: critique}
"""


def test_a_run_of_several_models_replays_each_as_recorded(tmp_path: Path) -> None:
    """An agent, its summarizer and an llm on two models share one cassette."""
    source = (ROOT / "pipelines" / "agent-review.yaml").read_text(encoding="utf-8")
    models = "  default: {adapter: scripted, script: agent-review.script.yaml}\n"
    assert models in source
    source = source.replace(
        models, models + "  critic: {adapter: scripted, script: critic.script.yaml}\n"
    )
    source = source.replace("invariants:\n", CRITIC + "invariants:\n")
    source = source.replace(
        "    summarizer:\n      model: default", "    summarizer:\n      model: critic"
    )
    (tmp_path / "agent-review.script.yaml").write_text(
        (ROOT / "pipelines" / "agent-review.script.yaml").read_text(encoding="utf-8")
    )
    (tmp_path / "critic.script.yaml").write_text(CRITIC_SCRIPT, encoding="utf-8")
    pipeline = tmp_path / "two-models.yaml"
    pipeline.write_text(source, encoding="utf-8")
    recorded, replayed = record_then_replay(pipeline, tmp_path / "two.cassette.jsonl")
    assert replayed == recorded
    facts = json.loads(recorded)["facts"]
    ids = {f["provenance"]["model_id"] for f in facts["evaluations"]}
    assert ids == {"scripted:agent-review.script.yaml"}
    (critique,) = facts["hypotheses"]
    assert critique["provenance"]["model_id"] == "scripted:critic.script.yaml"
