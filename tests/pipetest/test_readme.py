"""The README's examples of pipeline tests run as written."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .conftest import ROOT, cli
from .test_plugin import _pytest

SECTION = "## Testing pipelines: `init` and `test`"


def _blocks(language: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def _example_folder(tmp_path: Path) -> Path:
    for name in ("support-triage.yaml", "support-triage.script.yaml", "converge.lock"):
        shutil.copy(ROOT / "pipelines" / name, tmp_path / name)
    return tmp_path


def test_the_test_file_example_passes(tmp_path: Path) -> None:
    (yaml_block,) = _blocks("yaml")
    folder = _example_folder(tmp_path)
    (folder / "example.test.yaml").write_text(yaml_block)
    code, out, err = cli("test", folder / "example.test.yaml")
    assert (code, err) == (0, ""), out


def test_the_fixture_example_passes(tmp_path: Path) -> None:
    (python_block,) = _blocks("python")
    folder = _example_folder(tmp_path)
    (folder / "test_example.py").write_text(python_block)
    done = _pytest(folder, "test_example.py")
    assert done.returncode == 0, done.stdout + done.stderr
