"""The Python code blocks of the README's API section run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Python API and batch runs"


def _blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_section_has_examples() -> None:
    assert len(_blocks()) >= 2


@pytest.mark.parametrize("number", range(len(_blocks())))
def test_readme_api_example_runs(number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the examples name pipelines/ relative to the repository
    code = compile(_blocks()[number], f"README.md (API example {number + 1})", "exec")
    exec(code, {"__name__": "readme_example"})
