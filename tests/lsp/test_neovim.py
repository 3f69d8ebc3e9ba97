"""End to end with a real editor: Neovim's built-in LSP client, headless, on a project
`init` wrote, with the network off.

`init` makes the project; a typo goes into its pipeline; Neovim (`nvim
--headless`, Debian's package) opens it with `converge-dsl lsp` attached
(`neovim/drive.lua`), receives the diagnostics, asks for a completion, a
definition and a hover, renames a key (the edits applied in the pipeline and its
test file, and written), and writes what it got. The network is off in two ways: `init`,
Neovim and the server run in a network namespace of their own (`unshare -n`,
only the loopback) where one can be made (root on Linux; the test says which
in its output), and in any case every Python process of the test loads
`neovim/offline/sitecustomize.py`, which refuses and writes down any
connection or name lookup beyond the loopback: the test checks that `init`
and the server loaded it and that nothing was refused. Without Neovim the test
is skipped, except in CI, where `.ci/run` installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from tests.lsp.conftest import at

DRIVE = Path(__file__).parent / "neovim" / "drive.lua"
OFFLINE = Path(__file__).parent / "neovim" / "offline"


def _nvim() -> str:
    found = shutil.which("nvim")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("nvim is missing in CI: .ci/run installs the neovim package")
        pytest.skip("nvim is not installed (apt-get install neovim): the editor test needs it")
    return found


def _namespace() -> list[str]:
    """The prefix that runs a command in a network namespace of its own (only the
    loopback), or [] when none can be made here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "-n", "true"], capture_output=True, check=False)
    return [unshare, "-n"] if probe.returncode == 0 else []


def _position(text: str, needle: str, offset: int) -> lsp.Position:
    return at(text, needle, offset)


def test_neovim_gets_diagnostics_completion_definition_hover_and_a_rename(tmp_path: Path) -> None:
    nvim = _nvim()
    offline = _namespace()
    print("network off by:", "unshare -n and the socket guard" if offline else "the socket guard")
    log = tmp_path / "offline.log"
    guarded = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(OFFLINE), os.environ.get("PYTHONPATH")])),
        "CONVERGE_OFFLINE_LOG": str(log),
    }
    init = subprocess.run(
        [*offline, sys.executable, "-m", "converge_dsl", "init", "demo"],
        cwd=tmp_path,
        env=guarded,
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    project = tmp_path / "demo"
    pipeline = project / "demo.yaml"
    text = pipeline.read_text(encoding="utf-8").replace(
        "    dependencies: [summaries]", "    dependencies: [summary]"
    )
    pipeline.write_text(text, encoding="utf-8")
    complete = _position(text, "dependencies: [seeds]", 15)
    define = _position(text, "    model: default", 12)
    hover = _position(text, "target: summaries", 9)
    declared = _position(text, "  - name: summaries", 10)
    out = tmp_path / "nvim.json"
    env = {
        **guarded,
        "CONVERGE_FILE": str(pipeline),
        "CONVERGE_OUT": str(out),
        "CONVERGE_PYTHON": sys.executable,
        "CONVERGE_ROOT": str(project),
        "COMPLETE_LINE": str(complete.line),
        "COMPLETE_CHAR": str(complete.character),
        "DEFINE_LINE": str(define.line),
        "DEFINE_CHAR": str(define.character),
        "HOVER_LINE": str(hover.line),
        "HOVER_CHAR": str(hover.character),
        "RENAME_LINE": str(declared.line),
        "RENAME_CHAR": str(declared.character),
        "RENAME_TO": "digests",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    command = [*offline, nvim, "--headless", "--clean", "-n", "-u", str(DRIVE)]
    done = subprocess.run(
        command, cwd=project, env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert out.exists(), (done.returncode, done.stdout, done.stderr)
    got = json.loads(out.read_text(encoding="utf-8"))
    typo = text.count("\n", 0, text.index("[summary]"))
    found = sorted((d["code"], d["line"]) for d in got["diagnostics"])
    assert found == [("CD203", typo), ("CD300", typo)]  # the unknown key, and what it leaves
    unknown = next(d for d in got["diagnostics"] if d["code"] == "CD203")
    assert "did you mean 'summaries'?" in unknown["message"]
    assert "summaries" in got["completion"]
    assert "seeds" in got["completion"]
    models = text.count("\n", 0, text.index("  default: {adapter"))
    assert got["definition"] == [{"uri": pipeline.as_uri(), "line": models, "character": 2}]
    assert "One-line summaries of the request" in got["hover"]
    tests = project / "demo.test.yaml"
    assert "rename_error" not in got
    assert sorted(got["renamed"]) == sorted([pipeline.as_uri(), tests.as_uri()])
    renamed = pipeline.read_text(encoding="utf-8")
    assert renamed == text.replace("summaries", "digests").replace(
        "One-line digests", "One-line summaries"
    )  # the description is text, not the name
    assert tests.read_text(encoding="utf-8").count("digests") == 3
    assert "summaries" not in tests.read_text(encoding="utf-8")
    guard = log.read_text(encoding="utf-8").splitlines()
    assert not [line for line in guard if line.startswith("refused")], guard
    assert len([line for line in guard if line.startswith("loaded")]) >= 2  # init, the server
