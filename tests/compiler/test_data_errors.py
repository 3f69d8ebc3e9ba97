"""Run-time errors about data that a user reads, compared with files in expected/.

Each pipeline in data/ fails at run time; the human output on stderr names the
template's file:line:column, the suggestor and the cycle. Regenerate a file
(`UPDATE_EXPECTED=1`) only after reading the diff.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
CASES = sorted(path.stem for path in (HERE / "data").glob("*.yaml"))


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths in the messages, as a user types them


@pytest.mark.parametrize("name", CASES)
def test_run_time_data_error_is_located(name: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", f"tests/compiler/data/{name}.yaml"], out, err)
    assert code == 1
    expected = HERE / "expected" / f"{name}.stderr.txt"
    if os.environ.get("UPDATE_EXPECTED") == "1":
        expected.write_text(err.getvalue(), encoding="utf-8")
    assert err.getvalue() == expected.read_text(encoding="utf-8")
