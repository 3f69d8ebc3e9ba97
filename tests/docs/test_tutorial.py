"""The tutorial shows the files `converge-dsl init` writes, verbatim: it cannot drift.

Each of `hello.yaml`, `hello.script.yaml` and `hello.test.yaml` appears in
`docs/tutorial.md` as a fenced YAML block; the pre-commit configuration's
hooks are the ones the tutorial names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from converge_dsl._version import __version__
from converge_dsl.cli._init_files import project_files

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


def _yaml_blocks() -> list[str]:
    text = TUTORIAL.read_text(encoding="utf-8")
    return re.findall(r"^```yaml\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize(
    "name", ["hello.yaml", "hello.script.yaml", "hello.test.yaml", ".pre-commit-config.yaml"]
)
def test_the_tutorial_shows_each_file_init_writes(name: str) -> None:
    assert project_files("hello", __version__)[name] in _yaml_blocks()


def test_the_tutorial_names_the_hooks_init_configures() -> None:
    config = project_files("hello", __version__)[".pre-commit-config.yaml"]
    for hook in re.findall(r"id: (converge-dsl-\w+)", config):
        assert f"id: {hook}" in TUTORIAL.read_text(encoding="utf-8")
