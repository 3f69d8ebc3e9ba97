"""MCP tool calls through the answer cache, against a real FastMCP server that counts the
calls it answers: a second run makes none, `--offline` runs with the server's program gone,
an offline miss names the suggestor with a diff, and `--explain-cache`, `cache ls` and
`cache show` show the tool entries."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from converge_dsl.clock import FakeClock
from converge_dsl.models.answer_store import MemoryAnswerStore
from converge_dsl.models.caching import AnswerCache
from converge_dsl.tools import FakeTool, FakeToolServer, RunTools, ToolResult
from converge_dsl.tools.caching import caching_tools

from ._counting import calls, cli, folder, running
from ._servers import stdio_fixture

EXPECTED = Path(__file__).resolve().parent / "data"


def _cached_run(pipeline: Path, *flags: str) -> tuple[int, str, str]:
    cache = str(pipeline.parent / "cache")
    return cli("run", str(pipeline), "--format", "json", "--cache-dir", cache, *flags)


def _without_usage(out: str) -> dict[str, object]:
    document: dict[str, object] = json.loads(out)
    document.pop("usage")
    return document


def test_a_second_run_calls_no_tool_and_gives_the_same_result(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert cli("lock", str(pipeline))[0] == 0
    code, first, err = _cached_run(pipeline, "--cache")
    assert code == 0, err
    assert calls(tmp_path) == 2
    code, second, err = _cached_run(pipeline, "--cache", "--explain-cache")
    assert code == 0, err
    assert calls(tmp_path) == 2  # the second run: 0 calls
    assert _without_usage(second) == _without_usage(first)
    assert json.loads(second)["usage"]["cached_calls"] == 2
    explained = json.loads(err)["calls"]
    assert [(c["kind"], c["suggestor"], c["model"], c["outcome"]) for c in explained] == [
        ("tool", "measure", "mcp:words/lookup", "hit"),
        ("tool", "measure-again", "mcp:words/lookup", "hit"),
    ]
    assert running(str(tmp_path)) == []


def test_offline_runs_from_the_cache_with_the_server_program_gone(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert cli("lock", str(pipeline))[0] == 0
    code, first, err = _cached_run(pipeline, "--cache")
    assert code == 0, err
    (tmp_path / "bin" / "counting").unlink()  # no server can start now
    code, offline, err = _cached_run(pipeline, "--offline")
    assert code == 0, err
    assert _without_usage(offline) == _without_usage(first)
    assert calls(tmp_path) == 2


def test_an_offline_miss_names_the_suggestor_and_the_difference(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert cli("lock", str(pipeline))[0] == 0
    assert _cached_run(pipeline, "--cache")[0] == 0
    pipeline.write_text(pipeline.read_text().replace("content: alpha", "content: alpine"))
    code, _, err = cli("run", str(pipeline), "--offline", "--cache-dir", str(tmp_path / "cache"))
    assert code == 1
    assert "error[CD973]: --offline: no cached result for tool mcp:words/lookup of " in err
    assert "suggestor 'measure'" in err
    assert "the request differs at arguments.word" in err
    assert '-    "word": "alpha"\n+    "word": "alpine"' in err
    assert "  - name: measure\n" in err  # located at the suggestor
    assert calls(tmp_path) == 2


def test_without_a_lock_the_key_has_the_live_tool_list(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert _cached_run(pipeline, "--cache")[0] == 0
    assert _cached_run(pipeline, "--cache")[0] == 0
    assert calls(tmp_path) == 2
    (tmp_path / "extra.flag").write_text("")  # another tool list: other keys
    assert _cached_run(pipeline, "--cache")[0] == 0
    assert calls(tmp_path) == 4


def test_cache_ls_and_show_show_the_tool_entries(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert cli("lock", str(pipeline))[0] == 0
    assert _cached_run(pipeline, "--cache")[0] == 0
    where = ["--cache-dir", str(tmp_path / "cache")]
    code, out, _ = cli("cache", "ls", *where, "--format", "json")
    assert code == 0
    entries = json.loads(out)["entries"]
    assert sorted((e["kind"], e["suggestor"]) for e in entries) == [
        ("tool", "measure"),
        ("tool", "measure-again"),
    ]
    identity = entries[0]["identity"]
    assert identity["server"]["command"] == ["bin/counting"]
    assert identity["tools"].startswith("sha256:")
    key = next(e["key"] for e in entries if e["suggestor"] == "measure")
    code, out, _ = cli("cache", "show", key[:12], *where, "--format", "json")
    assert code == 0
    shown = json.loads(out)
    assert shown["request"] == {"name": "lookup", "arguments": {"word": "alpha"}}
    assert json.loads(shown["answer"]["text"]) == [{"word": "alpha", "length": 5}]
    _, out, _ = cli("cache", "stats", *where, "--format", "json")
    assert json.loads(out)["entries"] == 2
    assert json.loads(out)["kinds"] == {"tool": 2}
    _, out, _ = cli("cache", "stats", *where)
    assert out.startswith("2 entries (2 tool), ")


def _tools(cache: AnswerCache, server: FakeToolServer, max_calls: int | None = None) -> RunTools:
    spec = stdio_fixture()
    wrap = caching_tools(cache)
    return RunTools(
        {"fixture": spec},
        Path("."),
        environ={},
        factory=lambda s, b, e: server,
        wrap=wrap,
        max_calls=max_calls,
    )


def test_a_cached_result_is_the_exact_result_and_counts_toward_no_budget() -> None:

    store = MemoryAnswerStore()
    answer = ToolResult("part", {"n": 1}, is_error=True)
    server = FakeToolServer("s", [FakeTool("echo", lambda a: answer)])
    first = _tools(AnswerCache(store, clock=FakeClock()), server, max_calls=1)
    assert asyncio.run(first.call("me", 1, "fixture", "echo", {"b": 1, "a": [2]})) == (
        "part",
        True,
    )
    again = FakeToolServer("s", [FakeTool("echo", lambda a: "other")])
    second = _tools(AnswerCache(store, clock=FakeClock()), again, max_calls=1)

    async def twice() -> list[tuple[str, bool]]:
        return [await second.call("me", 1, "fixture", "echo", {"a": [2], "b": 1}) for _ in (1, 2)]

    assert asyncio.run(twice()) == [("part", True), ("part", True)]
    assert again.calls == []  # hits: no call,
    assert second.calls == 0  # and no budget spent
    row = next(iter(store.data.values()))
    assert row.kind == "tool"
    assert json.loads(row.value) == {
        "text": "part",
        "structured": {"n": 1},
        "is_error": True,
        "cut": False,
        "size": 4,
    }


AGENT = """\
  - name: clerk
    kind: agent
    model: default
    dependencies: [seeds]
    target: strategies
    goal: Measure a word.
    tools: [context.propose, finish, "mcp:words/*"]
"""

AGENT_SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {suggestor: clerk, turn: 0}
    tool_calls: [{name: "mcp:words/lookup", input: {word: omega}}]
  - match: {suggestor: clerk, turn: 1}
    tool_calls:
      - name: context.propose
        input: {id: omega, content: "omega has 5 letters", confidence: 0.9}
  - match: {suggestor: clerk, turn: 2}
    tool_calls: [{name: finish, input: {summary: done}}]
default: {reply: Done.}
"""


def test_an_agent_runs_offline_with_its_tools_listed_from_the_lock(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    text = pipeline.read_text().replace("suggestors:\n", "suggestors:\n" + AGENT)
    text = text.replace(
        "seeds:", "models:\n  default: {adapter: scripted, script: agent.script.yaml}\nseeds:"
    )
    pipeline.write_text(text)
    (tmp_path / "agent.script.yaml").write_text(AGENT_SCRIPT)
    assert cli("lock", str(pipeline))[0] == 0
    trace = tmp_path / "trace.jsonl"
    code, first, err = _cached_run(pipeline, "--cache")
    assert code == 0, err
    assert calls(tmp_path) == 3  # the agent's call and the two tool suggestors'
    (tmp_path / "bin" / "counting").unlink()  # no server can start now
    code, offline, err = _cached_run(pipeline, "--offline", "--trace", str(trace))
    assert code == 0, err
    assert _without_usage(offline) == _without_usage(first)
    assert '"id": "omega"' in offline
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    told = [e["output"] for e in events if e["type"] == "mcp_tool_called"]
    assert '[{"word": "omega", "length": 5}]' in told
    assert running(str(tmp_path)) == []


def test_offline_starts_no_server_the_lock_does_not_pin(tmp_path: Path) -> None:
    """Without a lock, a tool list could only be read by starting the server: `--offline`
    refuses (CD271, naming `converge-dsl lock`) and nothing is started."""
    pipeline = folder(tmp_path)
    script = tmp_path / "bin" / "counting"
    started = tmp_path / "started.flag"
    script.write_text(script.read_text().replace("exec ", f": > {started}\nexec ", 1))
    code, _, err = cli("run", str(pipeline), "--offline", "--cache-dir", str(tmp_path / "cache"))
    assert code == 1
    assert err.replace(str(tmp_path), "DIR") == (EXPECTED / "offline_unlocked.expected").read_text()
    assert not started.exists()
    assert running(str(tmp_path)) == []
    assert cli("lock", str(pipeline))[0] == 0  # with the pin, an offline run starts nothing
    started.unlink()
    code, _, err = cli("run", str(pipeline), "--offline", "--cache-dir", str(tmp_path / "cache"))
    assert "error[CD973]" in err
    assert not started.exists()


def test_two_packs_running_the_same_command_do_not_share_answers() -> None:
    """A pack's server is keyed with its name: the same command in two packs' folders is
    two servers."""
    store = MemoryAnswerStore()
    answered = []
    for name, answer in (("first/terms", "from first"), ("second/terms", "from second")):
        spec = stdio_fixture()._replace(name=name)
        server = FakeToolServer("s", [FakeTool("echo", lambda a, answer=answer: answer)])
        tools = RunTools(
            {name: spec},
            Path("."),
            environ={},
            factory=lambda s, b, e, server=server: server,
            wrap=caching_tools(AnswerCache(store, clock=FakeClock())),
        )
        answered.append(asyncio.run(tools.call("me", 1, name, "echo", {"text": "x"})))
    assert answered == [("from first", False), ("from second", False)]
    assert len(store.data) == 2


def test_a_pack_server_of_another_pack_version_does_not_reuse_its_answers() -> None:
    """A pack's server is keyed with its pack's pin in the lock: after an upgrade that
    changed the script behind the same command and tool list, its calls miss."""
    store = MemoryAnswerStore()
    answered = []
    pins = (
        ("from 1.0.0", {"version": "1.0.0", "sha256": "a" * 64}),
        ("from 1.0.0 again", {"version": "1.0.0", "sha256": "a" * 64}),
        ("from 1.1.0", {"version": "1.1.0", "sha256": "b" * 64}),
    )
    for answer, pin in pins:
        spec = stdio_fixture()._replace(name="glossary/terms")
        server = FakeToolServer("s", [FakeTool("echo", lambda a, answer=answer: answer)])
        tools = RunTools(
            {spec.name: spec},
            Path("."),
            environ={},
            factory=lambda s, b, e, server=server: server,
            wrap=caching_tools(AnswerCache(store, clock=FakeClock()), pins={spec.name: pin}),
        )
        answered.append(asyncio.run(tools.call("me", 1, spec.name, "echo", {"text": "x"})))
    assert answered == [("from 1.0.0", False), ("from 1.0.0", False), ("from 1.1.0", False)]
    assert len(store.data) == 2
