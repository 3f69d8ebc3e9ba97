"""`converge-dsl lock` pins each tool server (started, read, stopped: nothing left running),
a run holds the server to the pin (a changed tool list is CD267 before any call), and a
run without a lock reads the tools live as before."""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.tools import (
    FakeTool,
    FakeToolServer,
    LockedServer,
    LockedToolServer,
    ToolListChanged,
    lock_server,
    locked_server,
)

from ._counting import SERVER, calls, cli, folder, running
from ._servers import stdio_fixture

EXPECTED = Path(__file__).resolve().parent / "data"


def test_lock_records_each_server_and_leaves_nothing_running(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    code, out, err = cli("lock", str(pipeline), "--format", "json")
    assert code == 0, err
    shown = json.loads(out)
    assert [(t["name"], t["server"], t["tools"]) for t in shown["tools"]] == [
        ("words", "counting", ["lookup"])
    ]
    section = json.loads((tmp_path / "converge.lock").read_text())["pipelines"]["p.yaml"]
    record = section["tools"]["words"]
    assert record["transport"] == {
        "transport": "stdio",
        "command": ["bin/counting"],
        "cwd": ".",
        "env_pass": [],
        "env_set": {},
    }
    assert record["server"]["name"] == "counting"
    assert record["digest"] == shown["tools"][0]["digest"]
    assert [t["name"] for t in record["tools"]] == ["lookup"]
    assert record["tools"][0]["input_schema"]["required"] == ["word"]
    locked = LockedServer.from_json("words", record)  # the digest is the tools' digest
    assert locked.digest == locked.info().digest()
    assert running(str(tmp_path)) == []
    assert calls(tmp_path) == 0


def test_a_server_that_does_not_start_fails_the_lock_and_writes_nothing(
    tmp_path: Path,
) -> None:
    pipeline = folder(tmp_path)
    pipeline.write_text(pipeline.read_text().replace("bin/counting", "bin/nothing-here"))
    code, _, err = cli("lock", str(pipeline))
    assert code == 1
    assert "program 'bin/nothing-here' is not found" in err
    # It printed no code: the lock's failure is CD963 (docs/tools.md), as in a run.
    assert err.startswith("error[CD963]: tool server 'words': program")
    assert not (tmp_path / "converge.lock").exists()


def test_a_changed_tool_list_stops_the_run_before_any_call(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert cli("lock", str(pipeline))[0] == 0
    (tmp_path / "extra.flag").write_text("")  # the server now offers `extra` too
    trace = tmp_path / "trace.jsonl"
    code, _, err = cli("run", str(pipeline), "--trace", str(trace))
    assert code == 1
    shown = err.replace(str(tmp_path), "DIR")
    assert shown == (EXPECTED / "tool_list_changed.expected").read_text()
    assert calls(tmp_path) == 0
    assert "mcp_tool_called" not in trace.read_text()
    assert running(str(tmp_path)) == []


def test_after_a_relock_the_run_calls_the_changed_server(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert cli("lock", str(pipeline))[0] == 0
    (tmp_path / "extra.flag").write_text("")
    assert cli("lock", str(pipeline))[0] == 0
    code, _, err = cli("run", str(pipeline))
    assert code == 0, err
    assert calls(tmp_path) == 2


def test_a_run_without_a_lock_reads_the_tools_live(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    (tmp_path / "extra.flag").write_text("")
    code, _, err = cli("validate", str(pipeline))
    assert (code, err) == (0, "")
    code, _, err = cli("run", str(pipeline))
    assert code == 0, err
    assert calls(tmp_path) == 2


def test_validate_warns_of_a_server_locked_as_another_command(tmp_path: Path) -> None:
    pipeline = folder(tmp_path)
    assert cli("lock", str(pipeline))[0] == 0
    (tmp_path / "bin" / "nothing-here").write_text("")  # validate starts nothing
    pipeline.write_text(pipeline.read_text().replace("bin/counting", "bin/nothing-here"))
    code, out, err = cli("validate", str(pipeline))
    assert code == 0
    assert "warning[CD266]: tool server 'words' was locked as another server" in out + err


def test_lock_server_stops_the_server_it_read() -> None:
    server = FakeToolServer("s", [FakeTool("echo", lambda a: "x")], version="2.1")
    record = lock_server(stdio_fixture(), server)
    assert server.closed
    assert (record.server_name, record.server_version, record.tool_names()) == (
        "s",
        "2.1",
        ("echo",),
    )


def test_a_locked_server_starts_on_its_first_call_and_checks_its_tools() -> None:
    spec = stdio_fixture()
    before = FakeToolServer("s", [FakeTool("echo", lambda a: "x")])
    record = locked_server(spec, before.start())
    same = FakeToolServer("s", [FakeTool("echo", lambda a: "y", description="other words")])
    held = LockedToolServer(same, record, spec, "run: converge-dsl lock p.yaml")
    assert held.start() == record.info()
    assert not same.started

    assert asyncio.run(held.call("echo", {})).text == "y"
    grown = FakeToolServer("s", [FakeTool("echo", lambda a: "x"), FakeTool("new", str)])
    held = LockedToolServer(grown, record, spec, "run: converge-dsl lock p.yaml")
    with pytest.raises(ToolListChanged, match="'new' added; no call was made") as raised:
        asyncio.run(held.call("echo", {}))
    assert (
        raised.value.hint == "run: converge-dsl lock p.yaml (after checking the server's new tools)"
    )
    assert grown.calls == []


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda r: r.pop("tools"), "'tools' is not a list"),
        (lambda r: r.update(digest="sha256:00"), "'digest' is not the digest of its tools"),
        (lambda r: r.update(server={"name": 1}), "'server' is not an object"),
    ],
)
def test_a_malformed_lock_record_is_refused(edit, problem: str) -> None:  # type: ignore[no-untyped-def]
    server = FakeToolServer("s", [FakeTool("echo", lambda a: "x")])
    raw = locked_server(stdio_fixture(), server.start()).as_json()
    edit(raw)
    with pytest.raises(ValueError, match=problem):
        LockedServer.from_json("s", raw)


def test_a_replay_answers_the_recording_whatever_the_lock_pins_now(tmp_path: Path) -> None:
    """A replay stands in for the recorded servers: it is not held to a lock made since
    (here one that pins another tool list), and it starts nothing."""
    pipeline = folder(tmp_path)
    cassette = tmp_path / "run.cassette.jsonl"
    code, recorded, err = cli("run", str(pipeline), "--format", "json", "--record", str(cassette))
    assert code == 0, err
    (tmp_path / "extra.flag").write_text("")  # the server gains `extra`; the lock pins it
    assert cli("lock", str(pipeline))[0] == 0
    (tmp_path / "bin" / "counting").unlink()  # no server can start now
    code, replayed, err = cli("run", str(pipeline), "--format", "json", "--replay", str(cassette))
    assert (code, err) == (0, "")
    assert replayed == recorded
    assert calls(tmp_path) == 2  # the recording's calls only
    assert running(str(tmp_path)) == []


@pytest.mark.parametrize("given", [True, False])
def test_lock_passes_the_servers_the_environment_the_command_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: bool
) -> None:
    """`env.pass` reads the environment handed to the command line, not the process's:
    the server offers `extra` when the passed variable names an existing file."""
    pipeline = folder(tmp_path)
    script = tmp_path / "bin" / "counting"
    script.write_text(
        f"#!/bin/sh\nexec {sys.executable} {SERVER} {tmp_path / 'calls.txt'} "
        '"${EXTRA_MARKER:-none}"\n'
    )
    pipeline.write_text(
        pipeline.read_text().replace(
            "    allow: [lookup]\n", "    env: {pass: [EXTRA_MARKER]}\n    allow: [lookup]\n"
        )
    )
    (tmp_path / "extra.flag").write_text("")
    handed = {**os.environ, "EXTRA_MARKER": str(tmp_path / "extra.flag")}
    if given:
        monkeypatch.delenv("EXTRA_MARKER", raising=False)
    else:  # the process has it; the environment handed in does not
        monkeypatch.setenv("EXTRA_MARKER", handed.pop("EXTRA_MARKER"))
    out, err = io.StringIO(), io.StringIO()
    assert run(["lock", str(pipeline), "--format", "json"], out, err, handed) == 0, err
    (server,) = json.loads(out.getvalue())["tools"]
    assert server["tools"] == (["lookup", "extra"] if given else ["lookup"])
    assert running(str(tmp_path)) == []
