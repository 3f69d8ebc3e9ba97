"""Every example pipeline's output, pinned byte for byte.

`run --format json`, the human `run` output and `validate --format json` of
each pipeline in `pipelines/` are compared exactly with the files in
`tests/e2e/expected/examples/`. A refactor must leave them unchanged; a
deliberate change of output regenerates them (`UPDATE_EXPECTED=1 pytest
tests/e2e/test_examples_pinned.py`), and the diff is read before it lands.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected" / "examples"
EXAMPLES = sorted(
    path.stem
    for path in (ROOT / "pipelines").glob("*.yaml")
    if not path.name.endswith((".script.yaml", ".test.yaml"))
)
COMMANDS = {
    "run.json": ("run", "{pipeline}", "--format", "json"),
    "run.txt": ("run", "{pipeline}"),
    "validate.json": ("validate", "{pipeline}", "--format", "json"),
}


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # relative paths in the output, as a user types them


def test_every_example_is_pinned() -> None:
    assert EXAMPLES, "no example pipelines found"
    pinned = {path.name.split(".", 1)[0] for path in EXPECTED.iterdir()}
    assert pinned == set(EXAMPLES)


@pytest.mark.parametrize("suffix", sorted(COMMANDS))
@pytest.mark.parametrize("name", EXAMPLES)
def test_example_output_is_unchanged(name: str, suffix: str) -> None:
    argv = [arg.format(pipeline=f"pipelines/{name}.yaml") for arg in COMMANDS[suffix]]
    out, err = io.StringIO(), io.StringIO()
    code = run(argv, out, err)
    actual = f"exit: {code}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"
    expected = EXPECTED / f"{name}.{suffix}"
    if os.environ.get("UPDATE_EXPECTED") == "1":
        expected.write_text(actual, encoding="utf-8")
    assert actual == expected.read_text(encoding="utf-8")
