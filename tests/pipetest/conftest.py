"""Shared helpers of the pipeline-test tests: the CLI in process, run at the repository root."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
_TIMES = re.compile(r"\d+\.\d+s\b")


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def untimed(text: str) -> str:
    """`text` with its durations (`0.12s`) replaced by `Ns`, for comparing with a file."""
    return _TIMES.sub("Ns", text)


def expected(name: str, actual: str) -> str:
    """The text of `data/NAME`; written from `actual` when UPDATE_EXPECTED=1."""
    import os

    path = DATA / name
    if os.environ.get("UPDATE_EXPECTED") == "1":
        path.write_text(actual, encoding="utf-8")
    return path.read_text(encoding="utf-8")


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths in the messages, as a user types them
    # The test files of data/ run the example pipelines, outside their own folder.
    monkeypatch.setenv("CONVERGE_DSL_ALLOW_ROOTS", str(ROOT / "pipelines"))
