"""A pack that declares an MCP tool server (a FastMCP server shipped in the pack), used by
a pipeline over stdio: untrusted, `validate` and `run` refuse it (CD269) and nothing is
started; trusted, `lock` pins it after fetching the pack, a run calls it from a pack
template, a `tool` suggestor and an agent, and a replay reproduces the run byte for byte
with no `python3` to be found. A server whose folder would leave the pack is refused (CD268).
No process is left running (checked in /proc)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.errors import PipelineInvalid
from converge_dsl.packs import load_pack

EXPECTED = Path(__file__).resolve().parent / "expected"
SERVER_FILE = "glossary_terms_server.py"  # a name no other test's process has

PACK = """\
apiVersion: converge-dsl/v1
kind: Pack
name: glossary
version: 1.0.0
description: A glossary served by an MCP server of the pack.
suggestors:
  define:
    kind: tool
    description: Define the first seed's word.
    template:
      call: mcp:glossary/terms/define
      arguments: {word: "{{ facts.seeds[0].content }}"}
      output:
        id: "def-{{ item.word }}"
        content: "{{ item.word }}: {{ item.meaning }}"
tools:
  terms:
    command: [python3, @SERVER@]
    cwd: bin
    env: {pass: [GLOSSARY_COUNT]}
    allow: [define]
""".replace("@SERVER@", SERVER_FILE)

SERVER = '''\
"""A FastMCP glossary: `define(word)` answers the word and its meaning as JSON and appends
the word to the file GLOSSARY_COUNT names (so a test counts the calls). With a file
`extra.flag` beside that one, it also offers `extra` (a changed tool list)."""

import json
import os

from mcp.server.fastmcp import FastMCP

MEANINGS = {"alpha": "the first letter", "beta": "the second letter"}
server = FastMCP("glossary", log_level="WARNING")


@server.tool()
def define(word: str) -> str:
    """The word and its meaning, as JSON."""
    with open(os.environ["GLOSSARY_COUNT"], "a", encoding="utf-8") as out:
        out.write(word + "\\n")
    return json.dumps({"word": word, "meaning": MEANINGS.get(word, "unknown")})


if os.path.exists(os.path.join(os.path.dirname(os.environ["GLOSSARY_COUNT"]), "extra.flag")):

    @server.tool()
    def extra(word: str) -> str:
        """A tool that appears after the lock."""
        return word


if __name__ == "__main__":
    server.run("stdio")
'''

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: words
packs: {glossary: ">=1"}
repositories: [{path: repo}]
@TRUST@models:
  default: {adapter: scripted, script: clerk.script.yaml}
budget: {max_tool_calls: 5}
seeds:
  - {id: w, content: alpha}
suggestors:
  - {name: define, kind: pack, use: glossary/define, input: seeds, output: signals}
  - name: again
    kind: tool
    call: mcp:glossary/terms/define
    dependencies: [signals]
    arguments: {word: beta}
    target: evaluations
    output: {id: "def-{{ item.word }}", content: "{{ item.meaning }}"}
  - name: clerk
    kind: agent
    model: default
    dependencies: [evaluations]
    target: strategies
    goal: Define gamma.
    tools: [context.propose, finish, "mcp:glossary/terms/define"]
"""

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {suggestor: clerk, turn: 0}
    tool_calls: [{name: "mcp:glossary/terms/define", input: {word: gamma}}]
  - match: {suggestor: clerk, turn: 1}
    tool_calls: [{name: context.propose, input: {id: gamma, content: "gamma: unknown"}}]
  - match: {suggestor: clerk, turn: 2}
    tool_calls: [{name: finish, input: {summary: done}}]
default: {reply: Done.}
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def running(folder: Path) -> list[int]:
    """Processes working in `folder` (a pack server runs in the pack's folder of the cache
    there); none may outlive a command. By folder, not by command line: another test may
    run the same server at the same time."""
    found = []
    inside = str(folder.resolve())
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cwd = os.readlink(entry / "cwd")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if (cwd == inside or cwd.startswith(inside + "/")) and state != "Z":
                found.append(int(entry.name))
    return found


def _words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, trust: bool, pack: str = PACK
) -> Path:
    """The glossary pack published into `repo`, and the pipeline `p.yaml` using it."""
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GLOSSARY_COUNT", str(tmp_path / "count.txt"))
    source = tmp_path / "src" / "glossary"
    (source / "bin").mkdir(parents=True)
    (source / "pack.yaml").write_text(pack)
    (source / "bin" / SERVER_FILE).write_text(SERVER)
    code, _, err = cli("pack", "publish", str(source), "--repo", str(tmp_path / "repo"))
    assert code == 0, err
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        PIPELINE.replace("@TRUST@", "trust: {glossary: [terms]}\n" if trust else "")
    )
    (tmp_path / "clerk.script.yaml").write_text(SCRIPT)
    return pipeline


def _calls(tmp_path: Path) -> list[str]:
    count = tmp_path / "count.txt"
    return count.read_text().splitlines() if count.exists() else []


def test_an_untrusted_pack_server_is_refused_and_nothing_is_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = _words(tmp_path, monkeypatch, trust=False)
    code, out, err = cli("lock", str(pipeline), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["tools"] == []  # lock starts no untrusted server either
    code, out, _ = cli("validate", str(pipeline))
    assert code == 2
    shown = out.replace(str(tmp_path), "DIR")
    assert shown == (EXPECTED / "pack_tool_untrusted.expected").read_text()
    code, out, _ = cli("pack", "info", "glossary", "--repo", str(tmp_path / "repo"))
    assert code == 0
    assert out.endswith(  # what a user reads before trusting it
        "trust: {glossary: [SERVER]}):\n\n  terms  (stdio)\n"
        f'    runs ["python3", "{SERVER_FILE}"] in bin\n    passes GLOSSARY_COUNT\n'
        "    allows define\n"
    )
    code, _, err = cli("run", str(pipeline))
    assert code == 2
    assert "error[CD269]: tool server 'terms' of pack glossary is not trusted" in err
    assert "add: trust: {glossary: [terms]}" in err
    assert _calls(tmp_path) == []
    assert running(tmp_path / "cache") == []


def test_a_trusted_pack_server_is_locked_run_and_replayed_with_its_program_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = _words(tmp_path, monkeypatch, trust=True)
    code, out, err = cli("lock", str(pipeline), "--format", "json")
    assert code == 0, err
    locked = json.loads(out)["tools"]
    assert [(t["name"], t["server"], t["tools"]) for t in locked] == [
        ("glossary/terms", "glossary", ["define"])
    ]
    section = json.loads((tmp_path / "converge.lock").read_text())["pipelines"]["p.yaml"]
    assert section["tools"]["glossary/terms"]["transport"] == {
        "transport": "stdio",
        "command": ["python3", SERVER_FILE],
        "cwd": "bin",
        "env_pass": ["GLOSSARY_COUNT"],
        "env_set": {},
    }
    assert _calls(tmp_path) == []  # the lock read the tool list, called nothing
    assert running(tmp_path / "cache") == []
    assert cli("validate", str(pipeline)) == (0, "1 file valid\n", "")

    cassette = tmp_path / "run.cassette.jsonl"
    code, recorded, err = cli("run", str(pipeline), "--format", "json", "--record", str(cassette))
    assert code == 0, err
    result = json.loads(recorded)
    assert result["stop_reason"] == "converged"
    facts = {key: [f["content"] for f in found] for key, found in result["facts"].items()}
    assert facts["signals"] == ["alpha: the first letter"]  # the pack's own template
    assert facts["evaluations"] == ["the second letter"]  # a pipeline `tool` suggestor
    assert facts["strategies"] == ["gamma: unknown"]  # an agent
    assert _calls(tmp_path) == ["alpha", "beta", "gamma"]
    assert running(tmp_path / "cache") == []

    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # `python3` cannot be found now
    code, replayed, err = cli("run", str(pipeline), "--format", "json", "--replay", str(cassette))
    assert (code, err) == (0, "")
    assert replayed == recorded
    # A test file replaces the pack's server by its name in the run, `PACK/SERVER`.
    (tmp_path / "p.test.yaml").write_text(TEST_FILE)
    code, out, err = cli("test", str(tmp_path / "p.test.yaml"))
    assert code == 0, out + err
    assert _calls(tmp_path) == ["alpha", "beta", "gamma"]
    assert running(tmp_path / "cache") == []


TEST_FILE = """\
apiVersion: converge-dsl/v1
kind: PipelineTest
pipeline: p.yaml
tools:
  glossary/terms: {cassette: run.cassette.jsonl}
cases:
  - name: the pack's server answers from the cassette
    expect:
      stop_reason: converged
      facts: [{key: strategies, id: gamma, contains: unknown}]
"""


def test_a_pack_server_whose_tools_changed_since_the_lock_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = _words(tmp_path, monkeypatch, trust=True)
    assert cli("lock", str(pipeline))[0] == 0
    (tmp_path / "extra.flag").write_text("")
    code, _, err = cli("run", str(pipeline))
    assert code == 1
    shown = err.replace(str(tmp_path), "DIR")
    assert shown == (EXPECTED / "pack_tool_changed.expected").read_text()
    assert _calls(tmp_path) == []
    assert running(tmp_path / "cache") == []


def test_an_upgraded_pack_server_with_the_same_tools_misses_the_answer_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keys a pack's server with its pack's version and digest: a new version
    whose script answers otherwise behind the same command and tool list is called."""
    pipeline = _words(tmp_path, monkeypatch, trust=True)
    assert cli("lock", str(pipeline))[0] == 0
    cached = ("--format", "json", "--cache", "--cache-dir", str(tmp_path / "answers"))
    code, out, err = cli("run", str(pipeline), *cached)
    assert code == 0, err
    assert json.loads(out)["facts"]["signals"][0]["content"] == "alpha: the first letter"
    assert _calls(tmp_path) == ["alpha", "beta", "gamma"]

    source = tmp_path / "src" / "glossary"
    (source / "pack.yaml").write_text(PACK.replace("version: 1.0.0", "version: 1.0.1"))
    (source / "bin" / SERVER_FILE).write_text(SERVER.replace("the first", "the 1st"))
    code, _, err = cli("pack", "publish", str(source), "--repo", str(tmp_path / "repo"))
    assert code == 0, err
    code, _, err = cli("lock", str(pipeline), "--upgrade")
    assert code == 0, err
    code, out, err = cli("run", str(pipeline), *cached)
    assert code == 0, err
    assert json.loads(out)["facts"]["signals"][0]["content"] == "alpha: the 1st letter"
    assert _calls(tmp_path)[3:] == ["alpha", "beta", "gamma"]
    assert running(tmp_path / "cache") == []


def test_a_pack_servers_tool_the_lock_lacks_is_worded_as_a_pipeline_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CD265 of a pack's server: allowed by the pack, absent from the locked tool list."""
    pack = PACK.replace("allow: [define]", "allow: [define, extra]")
    pipeline = _words(tmp_path, monkeypatch, trust=True, pack=pack)
    assert cli("lock", str(pipeline))[0] == 0
    pipeline.write_text(
        pipeline.read_text().replace('"mcp:glossary/terms/define"', "mcp:glossary/terms/extra")
    )
    code, out, _ = cli("validate", str(pipeline), "--format", "json")
    assert code == 2
    found = [(d["code"], d["line"], d["message"], d["hint"]) for d in json.loads(out)]
    assert found == [
        (
            "CD265",
            27,
            "server 'glossary/terms' offers no tool 'extra' (locked: define)",
            "name one of its tools; if the server gained 'extra' since, run: "
            "converge-dsl lock p.yaml",
        )
    ]


def test_a_pack_server_whose_folder_leaves_the_pack_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "escaping"
    folder.mkdir()
    (tmp_path / "outside.py").write_text("")
    (folder / "pack.yaml").write_text(
        PACK.replace("    cwd: bin\n", "    cwd: ..\n")
        + "  shell:\n    command: [../outside.py]\n    allow: [run]\n"
    )
    with pytest.raises(PipelineInvalid) as refused:
        load_pack(folder)
    assert [(d.code, d.line) for d in refused.value.diagnostics] == [
        ("CD268", 19),
        ("CD268", 23),
    ]
    code, _, err = cli("pack", "publish", str(folder), "--repo", str(tmp_path / "repo"))
    assert code == 2
    shown = err.replace(str(tmp_path), "DIR")
    assert shown == (EXPECTED / "pack_tool_outside.expected").read_text()
    assert not (tmp_path / "repo").exists()


def test_a_program_linked_out_of_the_pack_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "linking"
    (folder / "bin").mkdir(parents=True)
    (tmp_path / "outside.py").write_text("")
    (folder / "bin" / "server").symlink_to(tmp_path / "outside.py")
    (folder / "pack.yaml").write_text(PACK.replace(f"[python3, {SERVER_FILE}]", "[./server]"))
    with pytest.raises(PipelineInvalid) as refused:
        load_pack(folder)
    assert [d.message for d in refused.value.diagnostics] == [
        "program './server' of tool server 'terms' is not a file inside the pack"
    ]
    (folder / "bin" / "server").unlink()
    (folder / "bin" / "server").write_text("")
    assert load_pack(folder).tools["terms"].command == ("./server",)


def test_a_pack_server_reaching_a_host_it_does_not_list_is_refused_as_a_pipelines_is(
    tmp_path: Path,
) -> None:
    """CD262 of a pack's HTTP server: the pipeline's diagnostic, with the pack's hint."""
    folder = tmp_path / "reaching"
    (folder / "bin").mkdir(parents=True)
    (folder / "pack.yaml").write_text(
        PACK + "  remote:\n    url: http://127.0.0.1:9/mcp\n    hosts: [localhost]\n"
        "    allow: [define]\n"
    )
    with pytest.raises(PipelineInvalid) as refused:
        load_pack(folder)
    assert [
        (d.code, d.line, d.column, d.path, d.message, d.hint) for d in refused.value.diagnostics
    ] == [
        (
            "CD262",
            23,
            10,
            ("tools", "remote", "url"),
            "the url of tool server 'remote' reaches host '127.0.0.1', which its hosts do not list",
            "the pack must be fixed by its author",
        )
    ]
