"""The hints of `pack list` and `pack info` name commands that work when typed."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from converge_dsl.cli import run

MY_PACK = Path(__file__).resolve().parents[1] / "data" / "docs" / "my-pack"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(MY_PACK, tmp_path / "my-pack")
    assert _run("pack", "publish", "my-pack", "--repo", "pack-repo")[0] == 0
    return tmp_path / "pack-repo"


def test_pack_list_takes_the_repository_as_an_argument(repo: Path) -> None:
    assert _run("pack", "list", "pack-repo") == _run("pack", "list", "--repo", "pack-repo")
    assert _run("pack", "list", "pack-repo")[1] == "my-pack  1.0.0\n"
    code, _, err = _run("pack", "list", "pack-repo", "--repo", "other")
    assert code == 3
    assert "not both" in err


def test_an_unknown_builtin_pack_hint_names_the_command_that_finds_it(repo: Path) -> None:
    code, _, err = _run("pack", "info", "my-pack")
    assert code == 1
    assert "CD574" in err
    suggested = err.split("e.g. ", 1)[1].split(";", 1)[0]
    assert suggested == "converge-dsl pack info my-pack --repo ./pack-repo"
    assert _run(*suggested.split()[1:])[0] == 0
