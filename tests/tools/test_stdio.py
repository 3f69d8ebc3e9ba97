"""A stdio server dies with the run that started it, even when the run is killed with
SIGKILL (no cleanup runs) and the server would outlive the end of its stdin: on Linux the
child asked for the parent-death signal before becoming the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from converge_dsl.tools._stdio import with_parent_death

from ._servers import FIXTURE
from .test_agent_tools import _running_with

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: killed
tools:
  fixture:
    command: [{python}, {fixture}, stdio, "0", {marker}]
    allow: [hang, linger]
seeds: [{{id: go, content: go}}]
suggestors:
  - name: stay
    kind: tool
    call: mcp:fixture/linger
    dependencies: [seeds]
    arguments: {{}}
    target: hypotheses
    output: {{format: text, id: stay}}
  - name: wait
    kind: tool
    call: mcp:fixture/hang
    dependencies: [seeds]
    arguments: {{}}
    target: signals
"""


def _wait_for(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal")
def test_a_stdio_server_dies_when_its_run_is_killed(tmp_path: Path) -> None:
    marker = str(tmp_path / "killed-run-marker")
    pipeline = tmp_path / "killed.yaml"
    pipeline.write_text(
        PIPELINE.format(
            python=json.dumps(sys.executable), fixture=json.dumps(str(FIXTURE)), marker=marker
        )
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "converge_dsl", "run", str(pipeline)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        lingering = Path(marker + ".lingering")
        assert _wait_for(lingering.exists, 30), "the server never started lingering"
        (server,) = _running_with(marker)
        stat = Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1].split()
        assert int(stat[1]) == run.pid  # the server itself is the run's child
        run.send_signal(signal.SIGKILL)
        run.wait(10)
        assert _wait_for(lambda: not _running_with(marker), 10), _running_with(marker)
    finally:
        run.kill()
        run.wait(10)
        for pid in _running_with(marker):
            os.killpg(pid, signal.SIGKILL)


def test_the_launcher_runs_the_program_itself(tmp_path: Path) -> None:
    command = with_parent_death(["/bin/sh", "-c", "echo $$ $PPID; echo $X"])
    shell = subprocess.run(
        command, env={"X": "kept"}, capture_output=True, text=True, timeout=30, check=True
    )
    parent = shell.stdout.split()[1]  # the shell's parent is this process: exec'ed
    assert shell.stdout.splitlines()[1] == "kept"
    assert int(parent) == os.getpid()
    if sys.platform.startswith("linux"):
        assert command[0] == sys.executable


def test_a_program_that_cannot_run_says_so(tmp_path: Path) -> None:
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    shell = subprocess.run(
        with_parent_death([str(script)]), capture_output=True, text=True, timeout=30, check=False
    )
    if sys.platform.startswith("linux"):
        assert shell.returncode == 127
        assert f"cannot run {script}: Permission denied" in shell.stderr


def test_a_server_whose_helper_keeps_its_pipes_closes_without_a_loop_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that leaves a helper outside its process group holding its stdout and
    stderr: its pipes never end, and their transports, left open at the close and
    collected after the loop closed, printed "Exception ignored ... Event loop is closed"
    (`sys.unraisablehook`)."""
    import gc

    from converge_dsl.frontend import StdioServerSpec
    from converge_dsl.tools import McpToolServer

    from ._servers import stdio_fixture

    ignored: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda what: ignored.append(repr(what.exc_value)))
    helper = tmp_path / "helper.pid"
    wrapper = tmp_path / "with-helper"
    wrapper.write_text(f'#!/bin/sh\nsetsid sleep 60 &\necho $! > "{helper}"\nexec "$@"\n')
    wrapper.chmod(0o755)
    fixture = stdio_fixture()
    spec = StdioServerSpec(
        name=fixture.name, command=(str(wrapper), *fixture.command), allow=fixture.allow
    )
    server = McpToolServer(spec, tmp_path, {"PATH": os.environ["PATH"]})
    try:
        server.start()
    finally:
        server.close()
        if helper.exists():
            os.kill(int(helper.read_text()), signal.SIGKILL)
    gc.collect()
    assert ignored == []
