"""A stdio child's environment holds only what the pipeline lists, read from the
environment of the run (the one given to `load`, not the process's)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from converge_dsl.frontend import StdioServerSpec
from converge_dsl.tools import child_environment

from ._counting import running
from ._servers import FIXTURE


def test_only_passed_and_set_variables_reach_the_child() -> None:
    spec = StdioServerSpec(
        name="s",
        command=("x",),
        env_pass=("TZ", "NOT_SET"),
        env_set={"LANG": "C.UTF-8"},
        allow=("t",),
    )
    parent = {"TZ": "UTC", "HOME": "/root", "PATH": "/bin", "SECRET": "s"}
    assert child_environment(spec, parent) == {"TZ": "UTC", "LANG": "C.UTF-8"}


def test_a_loaded_pipeline_hands_its_servers_the_environment_given_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`env.pass` reads the environment `load(..., env=...)` was given, not the process's."""
    import converge_dsl

    monkeypatch.delenv("PLANTED_FOR_LOAD", raising=False)
    pipeline = tmp_path / "p.yaml"
    # The server's command line names this test's folder: `running` finds its process,
    # not those of another test running the same fixture at the same time.
    marker = tmp_path / "server"
    pipeline.write_text(_PIPELINE.format(python=sys.executable, fixture=FIXTURE, marker=marker))
    env = {"PLANTED_FOR_LOAD": "from-load", "PATH": os.environ.get("PATH", "")}
    with converge_dsl.load(pipeline, env=env) as loaded:
        document = loaded.run()
    # The server read the value (the process's environment would give "<unset>"), and the
    # run redacts it: it knows the values it handed its servers from the same environment.
    assert [f.content for f in document.facts["signals"]] == ["[REDACTED]"]
    assert running(str(tmp_path)) == []


_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: env
tools:
  fixture:
    command: [{python}, {fixture}, stdio, '0', {marker}]
    env: {{pass: [PLANTED_FOR_LOAD]}}
    allow: [getenv]
seeds:
  - {{id: s, content: start}}
suggestors:
  - name: read
    kind: tool
    call: mcp:fixture/getenv
    dependencies: [seeds]
    arguments: {{name: PLANTED_FOR_LOAD}}
    target: signals
    output: {{format: text, id: value, content: "{{{{ item }}}}"}}
"""
