"""A pipeline folder whose tool server is `counting_server.py`, started through a script in
the folder (`bin/counting`), so a test can take the program away and keep the declaration."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

from converge_dsl.cli import run

SERVER = Path(__file__).resolve().parent / "counting_server.py"

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: counted
tools:
  words:
    command: [bin/counting]
    allow: [lookup]
budget: {{max_tool_calls: {calls}}}
seeds:
  - {{id: first, content: alpha}}
suggestors:
  - name: measure
    kind: tool
    call: mcp:words/lookup
    dependencies: [seeds]
    arguments: {{word: "{{{{ fact('seeds', 'first').content }}}}"}}
    target: signals
    output:
      id: "len-{{{{ item.word }}}}"
      content: "{{{{ item.word }}}} has {{{{ item.length }}}} letters"
  - name: measure-again
    kind: tool
    call: mcp:words/lookup
    dependencies: [signals]
    arguments: {{word: "{{{{ facts.signals | map(attribute='id') | join('+') }}}}"}}
    target: evaluations
    output:
      id: "len-{{{{ item.length }}}}"
      content: "{{{{ item.word }}}} has {{{{ item.length }}}} letters"
"""


def folder(tmp_path: Path, *, calls: int = 10) -> Path:
    """The pipeline `p.yaml` in `tmp_path` and its server script; the count file is
    `calls.txt`, the extra-tool marker `extra.flag` (absent)."""
    script = tmp_path / "bin" / "counting"
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        f"#!/bin/sh\nexec {sys.executable} {SERVER} {tmp_path / 'calls.txt'} "
        f"{tmp_path / 'extra.flag'}\n"
    )
    script.chmod(0o755)
    (tmp_path / "p.yaml").write_text(PIPELINE.format(calls=calls))
    return tmp_path / "p.yaml"


def calls(tmp_path: Path) -> int:
    """How many calls the server answered so far."""
    count = tmp_path / "calls.txt"
    return len(count.read_text().splitlines()) if count.exists() else 0


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def running(marker: str) -> list[int]:
    """Processes whose command line names `marker` (none may outlive a command)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def result(out: str) -> dict[str, object]:
    document: dict[str, object] = json.loads(out)
    return document
