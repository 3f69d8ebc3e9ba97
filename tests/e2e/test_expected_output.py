"""User-facing run output compared exactly against files in tests/e2e/expected/.

A run-time template error names the template's file:line:column, the
suggestor and the cycle, in the human output (stderr) and in the JSON
document's diagnostics. Regenerate a file only after reading the diff.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths in the messages, as a user types them


def expect(name: str, actual: str) -> None:
    """`actual` equals the file `name` (`UPDATE_EXPECTED=1` rewrites it: read the diff)."""
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED") == "1":
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8")


def test_template_error_human_output() -> None:
    code, out, err = _cli("run", "tests/e2e/data/template-error.yaml")
    assert code == 1
    expect("template-error.stderr.txt", err)
    expect("template-error.stdout.txt", out)


def test_template_error_json_output() -> None:
    code, out, _ = _cli("run", "tests/e2e/data/template-error.yaml", "--format", "json")
    assert code == 1
    expect("template-error.json", out)
