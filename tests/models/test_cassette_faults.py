"""Record and replay a fault matrix: the replay's `run --format json` is byte-identical.

Every case runs against the loopback provider (`FakeProviderServer`): retries
after 5xx, failover after 429, a retry the call budget refuses (CD904, not
CD905), a call the token budget refuses, concurrent llm suggestors under
`max_tokens` and concurrent agents under `max_model_calls`. The replay never
reaches the server, and reports the same usage, stop reason and facts.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

FAIL = FakeReply(status=500, retry_after="0")
LIMITED = FakeReply(status=429, retry_after="0")
READ = FakeReply(text="", tool_calls=(("context.read", {"key": "seeds"}),), input_tokens=2)


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv("FAULTS_MAIN_KEY", "sk-faults-main-0123456789")
    monkeypatch.setenv("FAULTS_SPARE_KEY", "sk-faults-spare-0123456789")
    with FakeProviderServer(honour_max_tokens=True) as running:
        running.reset(FakeReply(text="word " * 30, input_tokens=2))
        yield running


def llm(name: str, depends: str = "seeds") -> dict[str, Any]:
    return {
        "name": name,
        "kind": "llm",
        "model": "remote",
        "dependencies": [depends],
        "target": "hypotheses",
        "prompt": {"user": f"Say {name} about tea, please, at some length"},
        "output": {"format": "text", "id": name},
    }


def agent(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "agent",
        "model": "remote",
        "dependencies": ["seeds"],
        "target": "evaluations",
        "goal": f"Evaluate the topic as {name}.",
        "max_turns": 3,
        "tools": ["context.read", "context.propose"],
    }


def write(tmp: Path, server: FakeProviderServer, budget: dict[str, Any], suggestors: Any) -> Path:
    doc = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "faults",
        "models": {
            "remote": {
                "adapter": "openai",
                "base_url": server.openai_base_url,
                "model": "fake",
                "retries": 3,
                "accounts": [
                    {"name": "main", "api_key_env": "FAULTS_MAIN_KEY"},
                    {"name": "spare", "api_key_env": "FAULTS_SPARE_KEY"},
                ],
            }
        },
        "budget": {"max_cycles": 6, **budget},
        "seeds": [{"id": "topic", "content": "tea"}],
        "suggestors": suggestors,
    }
    path = tmp / "faults.yaml"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


CASES: dict[str, tuple[dict[str, Any], list[Any], tuple[FakeReply, ...]]] = {
    "retries": ({}, [llm("a")], (FAIL, FAIL)),
    "failover-429": ({}, [llm("a")], (LIMITED,)),
    "retry-refused-by-the-call-budget": ({"max_model_calls": 2}, [llm("a")], (FAIL, FAIL, FAIL)),
    "refused-by-the-token-budget": ({"max_tokens": 60}, [llm("a"), llm("b", "hypotheses")], ()),
    "concurrent-llms-under-max-tokens": (
        {"max_tokens": 150},
        [llm("a"), llm("b"), llm("c")],
        (FAIL,),
    ),
    "concurrent-agents-under-max-model-calls": (
        {"max_model_calls": 5},
        [agent("r1"), agent("r2"), agent("r3")],
        (READ, READ, FAIL, READ, READ, READ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_recorded_fault_replays_byte_identically(
    case: str, server: FakeProviderServer, tmp_path: Path
) -> None:
    budget, suggestors, queued = CASES[case]
    server.queue(*queued)
    pipeline = write(tmp_path, server, budget, suggestors)
    cassette = tmp_path / "faults.cassette.jsonl"
    code, recorded, err = cli("run", pipeline, "--format", "json", "--record", cassette)
    assert recorded, err
    seen = len(server.requests)
    replay_code, replayed, replay_err = cli(
        "run", pipeline, "--format", "json", "--replay", cassette
    )
    assert len(server.requests) == seen  # the replay never reached the server
    assert (replay_code, replayed) == (code, recorded), replay_err
    result = json.loads(recorded)
    if case == "retries":
        assert result["usage"]["model_calls"] == 3
    if case == "failover-429":
        assert result["usage"]["model_calls"] == 2
        assert result["facts"]["hypotheses"][0]["provenance"]["account"] == "spare"
    if case == "retry-refused-by-the-call-budget":
        assert result["stop_reason"] == "model_call_budget_exhausted"
        assert [d["code"] for d in result["diagnostics"]] == ["CD904"]
    if case == "refused-by-the-token-budget":
        assert result["stop_reason"] == "token_budget_exhausted"


def test_every_case_is_a_fault_the_recording_saw(
    server: FakeProviderServer, tmp_path: Path
) -> None:
    """The cassette keeps the attempts and the budget's decisions of a retried call."""
    server.queue(FAIL, FAIL)
    pipeline = write(tmp_path, server, {}, [llm("a")])
    cassette = tmp_path / "c.jsonl"
    cli("run", pipeline, "--format", "json", "--record", cassette)
    (line,) = [json.loads(text) for text in cassette.read_text(encoding="utf-8").splitlines()]
    assert [a["status"] for a in line["attempts"]] == [500, 500, 200]
    assert [decision for decision, _ in line["gates"]] == ["allowed", "allowed"]
    assert line["step"] > max(step for _, step in line["gates"])
