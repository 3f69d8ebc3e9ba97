"""A key-schema rejection as the user reads it: `run --format json` and the human output.

`tests/e2e/data/key-schema.yaml` emits three tickets; the third one's data
breaks the key's schema only at run time (its category comes from an input),
so the promotion gate rejects it with a `diagnostic` fact that names the JSON
pointer and the rule broken. Both outputs are compared exactly with the files
in `expected/`; regenerate them (`UPDATE_EXPECTED=1`) only after reading the diff.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(
    ("argv", "name"),
    [((), "key-schema-rejection.txt"), (("--format", "json"), "key-schema-rejection.json")],
)
def test_a_schema_rejection_names_the_pointer_and_the_rule(
    argv: tuple[str, ...], name: str
) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", "tests/e2e/data/key-schema.yaml", *argv], out, err)
    assert code == 0, err.getvalue()
    expected = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED") == "1":
        expected.write_text(out.getvalue(), encoding="utf-8")
    assert out.getvalue() == expected.read_text(encoding="utf-8")


def test_a_bad_category_given_on_the_command_line_is_rejected_too() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", "tests/e2e/data/key-schema.yaml", "--input", "category=billing"], out, err)
    assert code == 0
    assert "validation:rejected" not in out.getvalue()
