"""Token budgets hold against a loopback server (docs/architecture.md §7).

The matrix: concurrent llm suggestors, a chain, an agent and a batch cap, each
against a server that honours `max_tokens` and one that ignores it. Where the
server honours the cap the run never uses more than its budget; where it does
not, every token past the budget is accounted for by a `budget:overshoot`
warning on `diagnostic`, naming the cap the request was sent with.

The server reports 2 input tokens a request, no more than the adapter's
estimate (a quarter of the prompt's characters): the input side of the
guarantee rests on that estimate (see docs/reference.md, "Token budgets").
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

LONG = "word " * 80  # 400 characters: 100 output tokens unless the server cuts it


def cli(*argv: str | Path) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, json.loads(out.getvalue()), err.getvalue()


@pytest.fixture(params=[True, False], ids=["honours-cap", "ignores-cap"])
def server(request: pytest.FixtureRequest) -> Iterator[FakeProviderServer]:
    with FakeProviderServer(honour_max_tokens=request.param) as running:
        running.reset(FakeReply(text=LONG, input_tokens=2))
        yield running


def honours(server: FakeProviderServer) -> bool:
    return bool(server._state.honour_max_tokens)


def pipeline(tmp: Path, server: FakeProviderServer, budget: int, suggestors: list[Any]) -> Path:
    doc = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "budget-matrix",
        "models": {
            "remote": {
                "adapter": "openai",
                "base_url": server.openai_base_url,
                "model": "fake",
                "retries": 0,
            }
        },
        "budget": {"max_tokens": budget, "max_cycles": 10},
        "seeds": [{"id": "topic", "content": "tea"}],
        "suggestors": suggestors,
    }
    path = tmp / "pipeline.yaml"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def llm(name: str, target: str, depends: str = "seeds") -> dict[str, Any]:
    return {
        "name": name,
        "kind": "llm",
        "model": "remote",
        "dependencies": [depends],
        "target": target,
        "prompt": {"user": f"Say {name} about tea at length please"},
        "output": {"format": "text", "id": name},
    }


def used(result: dict[str, Any]) -> int:
    usage = result["usage"]
    return int(usage["input_tokens"] + usage["output_tokens"])


def overshoots(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        fact
        for fact in result["facts"].get("diagnostic", [])
        if fact["id"].startswith("budget:overshoot")
    ]


def check(result: dict[str, Any], budget: int, server: FakeProviderServer) -> None:
    """The guarantee: within budget when the server honours caps, else each token past
    the budget is reported by an overshoot warning."""
    reported = sum(int(f["data"]["overshoot"]) for f in overshoots(result))
    if honours(server):
        assert used(result) <= budget, result["usage"]
        assert reported == 0
    else:
        assert used(result) - budget <= reported, (result["usage"], reported)
    for seen in server.requests:
        assert seen.body["max_tokens"] <= budget


@pytest.mark.parametrize("budget", [150, 260])
def test_concurrent_llm_suggestors(server: FakeProviderServer, tmp_path: Path, budget: int) -> None:
    suggestors = [llm(f"s{i}", "hypotheses") for i in range(3)]
    _, result, err = cli("run", pipeline(tmp_path, server, budget, suggestors), "--format", "json")
    check(result, budget, server)
    assert result["stop_reason"] in ("converged", "token_budget_exhausted"), err
    if not honours(server):
        assert overshoots(result), "an ignored cap is reported"
        note = overshoots(result)[0]
        assert "does not honour the cap" in note["content"]


def test_a_chain_of_three(server: FakeProviderServer, tmp_path: Path) -> None:
    chain = [
        llm("first", "hypotheses"),
        llm("second", "strategies", "hypotheses"),
        llm("third", "evaluations", "strategies"),
    ]
    budget = 300
    _, result, _ = cli("run", pipeline(tmp_path, server, budget, chain), "--format", "json")
    check(result, budget, server)
    if honours(server):
        assert {"evaluations", "hypotheses", "strategies"} <= set(result["facts"])


def test_an_agent(server: FakeProviderServer, tmp_path: Path) -> None:
    agent = {
        "name": "reviewer",
        "kind": "agent",
        "model": "remote",
        "dependencies": ["seeds"],
        "target": "evaluations",
        "goal": "Evaluate the topic.",
        "max_turns": 6,
        "tools": ["context.read", "context.propose"],
    }
    read = FakeReply(text=LONG, tool_calls=(("context.read", {"key": "seeds"}),), input_tokens=2)
    server.queue(read, read, read, read, read)
    budget = 500
    _, result, _ = cli("run", pipeline(tmp_path, server, budget, [agent]), "--format", "json")
    check(result, budget, server)
    assert len(server.requests) >= 2


@pytest.mark.parametrize("cap", [150, 400])
def test_a_batch_cap(server: FakeProviderServer, tmp_path: Path, cap: int) -> None:
    suggestors = [llm("s0", "hypotheses"), llm("s1", "strategies")]
    path = pipeline(tmp_path, server, 100000, suggestors)
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(4)), encoding="utf-8")
    out = tmp_path / "results.jsonl"
    argv = ["run", str(path), "--cases", str(cases), "--out", str(out), "--max-tokens", str(cap)]
    run([*argv, "--concurrency", "2"], io.StringIO(), io.StringIO())
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    total = sum(used(line) for line in lines)
    reported = sum(int(f["data"]["overshoot"]) for line in lines for f in overshoots(line))
    if honours(server):
        assert total <= cap
        assert reported == 0
    else:
        assert total - cap <= reported
    for seen in server.requests:
        assert seen.body["max_tokens"] <= cap


def test_an_answer_that_fails_to_parse_is_settled_with_the_servers_usage(
    server: FakeProviderServer, tmp_path: Path
) -> None:
    bad = llm("scan", "competitors")
    bad["output"] = {"format": "json"}
    server.reset(FakeReply(text='[{"name": "Lipton"}, {"name": "Twin' + "x" * 200, input_tokens=7))
    _, result, _ = cli("run", pipeline(tmp_path, server, 100000, [bad]), "--format", "json")
    (diagnostic,) = [f for f in result["facts"]["diagnostic"] if "invalid-output" in f["id"]]
    assert "not JSON" in diagnostic["content"]
    assert result["usage"]["input_tokens"] == 7
    assert result["usage"]["output_tokens"] > 0
    if honours(server):  # the server cut it at the budget's cap, and the diagnostic says so
        server.reset(FakeReply(text='[{"name": "' + "y" * 400 + '"}]', input_tokens=7))
        bad["max_tokens"] = 20
        _, cut, _ = cli("run", pipeline(tmp_path, server, 100000, [bad]), "--format", "json")
        (note,) = [f for f in cut["facts"]["diagnostic"] if "invalid-output" in f["id"]]
        assert "cut at the token limit (20)" in note["content"]
        assert "raise the suggestor's max_tokens" in note["content"]
