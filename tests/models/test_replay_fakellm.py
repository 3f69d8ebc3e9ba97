"""Record and replay the fault matrix against a server nobody here wrote: `fakellm` (PyPI).

Every case is first run as `converge-dsl run --record C.jsonl --format json`
against one fakellm process (both wire formats); the server is then stopped,
and each case runs again as `--replay C.jsonl --format json`: the two outputs
(facts, usage, stop reason, diagnostics) are byte-identical and the exit codes
equal. The matrix: retries after 500 (plain and streamed), a retry after 429,
failover to the spare account, a retry refused by `max_model_calls`, a call
refused by `max_tokens`, a server that ignores the cap it is sent, concurrent
llm suggestors under `max_tokens`, concurrent agents (under `max_model_calls`,
streamed, failing over, under `max_tokens`), an answer that is not the JSON
asked for, a stream cut halfway (alone and among concurrent calls) and a body
that is not JSON. Each case also checks, on the recorded run, that its fault
happened (stop reason, diagnostic codes, model calls, the account that answered).

fakellm injects what it can: any HTTP status on a plain request (chosen by the
turn of a conversation, or by the account's key), answers that ignore
`max_tokens`, text where JSON was asked for. It cannot fail a streamed request
(it streams a 200 whatever the rule's status), cut an answer or send a body
that is not JSON; for those, our `FaultProxy` stands in front of it and spoils
the answer fakellm gave.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from converge_dsl.cli import run

from ._fakellm import Fault, FaultProxy, forget_conversations, running_fakellm

pytest.importorskip("fakellm", reason="fakellm (the `dev` extra) is not installed")

MAIN_KEY = "sk-fakellm-main-0123456789"
SPARE_KEY = "sk-fakellm-spare-0123456789"


def rule(name: str, respond: dict[str, Any], **when: Any) -> dict[str, Any]:
    return {"name": name, "when": when, "respond": respond}


def propose(who: str, turn: int, content: str) -> dict[str, Any]:
    """fakellm's rule for the turn at which agent `who` proposes its evaluation."""
    arguments = {"id": who, "content": content, "confidence": 0.9}
    return rule(
        f"agent-propose-{who}",
        {"tool_calls": [{"name": "context_propose", "arguments": arguments}]},
        messages_contain=f"agent-goal {who}",
        turn=turn,
        tools_include="context_propose",
    )


# A rule matches a phrase of the prompt (the first match answers); `turn` counts the
# requests of one conversation (one first user message): a request sent again is the
# next turn. Agent r2's second request fails, so it proposes one turn later.
RULES = json.dumps(
    {
        "version": 1,
        "rules": [
            rule("fail-twice", {"status": 500}, messages_contain="retry-500", turn_in=[1, 2]),
            rule("limited-once", {"status": 429}, messages_contain="retry-429", turn=1),
            rule(
                "main-limited-openai",
                {"status": 429, "error": "the main account is over its quota"},
                messages_contain="failover",
                **{"header.authorization": f"Bearer {MAIN_KEY}"},
            ),
            rule(
                "main-limited-anthropic",
                {"status": 429, "error": "the main account is over its quota"},
                messages_contain="failover",
                **{"header.x-api-key": MAIN_KEY},
            ),
            rule("always-down", {"status": 500}, messages_contain="always-500"),
            rule("not-json", {"content": "Sure! Here they are."}, messages_contain="not-json"),
            rule(
                "items",
                {"content": '[{"id": "a", "name": "Alpha"}, {"id": "b", "name": "Beta"}]'},
                messages_contain="as JSON",
            ),
            rule(
                "agent-read",
                {"tool_calls": [{"name": "context_read", "arguments": {"key": "seeds"}}]},
                messages_contain="agent-goal",
                turn=1,
                tools_include="context_read",
            ),
            rule("agent-r2-fails", {"status": 500}, messages_contain="agent-goal r2", turn=2),
            propose("r1", 2, "tea works"),
            propose("r2", 3, "tea sells"),
            propose("r3", 2, "tea grows"),
            rule("agent-done", {"content": "Done."}, messages_contain="agent-goal"),
            rule("words", {"content": "word " * 40}, messages_contain="words"),
        ],
    }
)


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def llm(name: str, phrase: str, depends: str = "seeds", *, json_items: bool = False) -> Any:
    output: dict[str, Any] = {"format": "text", "id": name}
    if json_items:
        output = {"format": "json", "id": "{{ item.id }}", "content": "{{ item.name }}"}
    return {
        "name": name,
        "kind": "llm",
        "model": "remote",
        "dependencies": [depends],
        "target": "hypotheses",
        "prompt": {"user": f"{name}: {phrase}, about tea"},
        "output": output,
    }


def agent(name: str, phrase: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "kind": "agent",
        "model": "remote",
        "dependencies": ["seeds"],
        "target": "evaluations",
        "goal": f"agent-goal {name}: evaluate the topic {phrase}.",
        "max_turns": 4,
        "tools": ["context.read", "context.propose"],
    }


def pipeline(
    folder: Path, base_url: str, wire: str, budget: dict[str, Any], suggestors: Any, **model: Any
) -> Path:
    doc = {
        "apiVersion": "converge-dsl/v1",
        "kind": "Pipeline",
        "name": "faults",
        "models": {
            "remote": {
                "adapter": wire,
                "base_url": f"{base_url}/v1" if wire == "openai" else base_url,
                "model": "gpt-4o-mini" if wire == "openai" else "claude-sonnet-4-5",
                "retries": 3,
                "accounts": [
                    {"name": "main", "api_key_env": "FAKELLM_MAIN_KEY"},
                    {"name": "spare", "api_key_env": "FAKELLM_SPARE_KEY"},
                ],
                **model,
            }
        },
        "budget": {"max_cycles": 6, **budget},
        "seeds": [{"id": "topic", "content": "tea"}],
        "suggestors": suggestors,
    }
    path = folder / "faults.yaml"
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


@dataclass(frozen=True)
class Case:
    """One fault of the matrix and what the recorded run must show of it."""

    suggestors: tuple[Any, ...]
    stop: str = "converged"
    codes: tuple[str, ...] = ()
    calls: int | None = None  # model calls of the recorded run, when they are certain
    account: str | None = None  # the account that answered the llm suggestors
    budget: Mapping[str, Any] = field(default_factory=dict)
    model: Mapping[str, Any] = field(default_factory=dict)
    faults: Mapping[str, tuple[Fault, ...]] = field(default_factory=dict)


ONE_ACCOUNT = {"accounts": [{"name": "main", "api_key_env": "FAKELLM_MAIN_KEY"}]}
WORDS = ("words-a", "words-b", "words-c")
CASES: dict[str, Case] = {
    "retries-after-500": Case((llm("a", "retry-500"),), calls=3),
    "retries-after-500-streamed": Case(
        (llm("a", "words fail-me"),),
        calls=3,
        model={"stream": True},
        faults={"fail-me": ("500", "500")},
    ),
    "retry-after-429": Case((llm("a", "retry-429"),), calls=2, model=ONE_ACCOUNT),
    "failover-to-the-spare-account": Case((llm("a", "failover"),), calls=2, account="spare"),
    "retry-refused-by-max-model-calls": Case(
        (llm("a", "always-500"),),
        "model_call_budget_exhausted",
        ("CD904",),
        calls=2,
        budget={"max_model_calls": 2},
    ),
    "call-refused-by-max-tokens": Case(
        (llm("a", "words"), llm("b", "words", "hypotheses")),
        "token_budget_exhausted",
        ("CD903",),
        calls=1,
        budget={"max_tokens": 62},
    ),
    "cap-ignored-by-fakellm": Case(
        (llm("a", "words"), llm("b", "words", "hypotheses")),
        "token_budget_exhausted",
        ("CD903",),
        calls=2,
        budget={"max_tokens": 90},
    ),
    "concurrent-llms-under-max-tokens": Case(
        (llm("a", WORDS[0]), llm("b", f"{WORDS[1]} retry-500"), llm("c", WORDS[2])),
        "token_budget_exhausted",
        ("CD903",),
        budget={"max_tokens": 200},
    ),
    "concurrent-agents-under-max-model-calls": Case(
        (agent("r1"), agent("r2"), agent("r3")),
        "model_call_budget_exhausted",
        ("CD904",),
        calls=6,
        budget={"max_model_calls": 6},
    ),
    "concurrent-streamed-agents-under-max-model-calls": Case(
        (agent("r1"), agent("r2"), agent("r3")),
        "model_call_budget_exhausted",
        ("CD904",),
        calls=5,
        budget={"max_model_calls": 5},
        model={"stream": True},
    ),
    "concurrent-agents-failing-over": Case(
        (agent("r1", "failover"), agent("r2", "failover"), agent("r3", "failover")),
        budget={"max_model_calls": 30},
    ),
    "concurrent-agents-under-max-tokens": Case(
        (agent("r1"), agent("r2"), agent("r3")),
        "token_budget_exhausted",
        ("CD903",),
        budget={"max_tokens": 400},
    ),
    "answer-not-the-json-asked-for": Case((llm("a", "not-json as JSON", json_items=True),)),
    "cut-stream": Case(
        (llm("a", "words cut-me"),),
        "error",
        ("CD911",),
        calls=1,
        model={"stream": True},
        faults={"cut-me": ("cut",)},
    ),
    "cut-stream-among-concurrent-calls": Case(
        (llm("a", WORDS[0]), llm("b", f"{WORDS[1]} cut-me"), llm("c", WORDS[2])),
        "error",
        ("CD911",),
        model={"stream": True},
        faults={"cut-me": ("cut",)},
    ),
    "garbage-body": Case(
        (llm("a", "words spoil-me"),),
        "error",
        ("CD911",),
        calls=1,
        faults={"spoil-me": ("garbage",)},
    ),
}
WIRES = ("openai", "anthropic")


@dataclass(frozen=True)
class Recording:
    code: int
    output: str
    errors: str
    pipeline: Path
    cassette: Path
    spoiled: tuple[Fault, ...]


def record(folder: Path, url: str, wire: str, case: Case) -> Recording:
    """Run the case against fakellm (through the proxy when it spoils answers), recording it."""
    with FaultProxy(url, case.faults) as proxy:
        base_url = proxy.url if case.faults else url
        path = pipeline(folder, base_url, wire, case.budget, case.suggestors, **case.model)
        cassette = folder / "faults.cassette.jsonl"
        code, out, err = cli("run", path, "--format", "json", "--record", cassette)
    return Recording(code, out, err, path, cassette, tuple(proxy.spoiled))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Recording]:
    """Every case of both wire formats recorded against one fakellm, stopped before any replay."""
    runs: dict[tuple[str, str], Recording] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FAKELLM_MAIN_KEY", MAIN_KEY)
        patch.setenv("FAKELLM_SPARE_KEY", SPARE_KEY)
        with running_fakellm(tmp_path_factory.mktemp("fakellm"), RULES) as url:
            for wire in WIRES:
                for name, case in CASES.items():
                    forget_conversations(url)
                    folder = tmp_path_factory.mktemp(f"{wire}-{name}")
                    runs[wire, name] = record(folder, url, wire, case)
        with pytest.raises(httpx.ConnectError):
            httpx.get(url, timeout=2)  # the server is gone: a replay cannot reach it
    return runs


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("wire", WIRES)
def test_a_fault_recorded_against_fakellm_replays_byte_identically(
    recorded: dict[tuple[str, str], Recording], wire: str, name: str
) -> None:
    case, recording = CASES[name], recorded[wire, name]
    result = json.loads(recording.output or "{}")
    assert result, recording.errors
    assert result["stop_reason"] == case.stop, recording.output
    assert [d["code"] for d in result["diagnostics"]] == list(case.codes), recording.output
    if case.calls is not None:
        assert result["usage"]["model_calls"] == case.calls, recording.output
    if case.account is not None:
        answered = {f["provenance"]["account"] for f in result["facts"]["hypotheses"]}
        assert answered == {case.account}
    assert recording.spoiled == tuple(f for faults in case.faults.values() for f in faults)
    code, replayed, err = cli(
        "run", recording.pipeline, "--format", "json", "--replay", recording.cassette
    )
    assert (code, replayed) == (recording.code, recording.output), err
