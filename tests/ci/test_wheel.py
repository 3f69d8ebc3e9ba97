"""The wheel holds every package of the source tree, and runs from itself.

An editable install finds any folder under `converge_dsl/`, so a package left
out of `[tool.setuptools] packages` in `pyproject.toml` passes every other
test and breaks a plain `pip install`. Here the wheel is built as a user's pip
builds it, unpacked, and its own code validates and runs an example pipeline
(the dependencies come from this environment).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "converge_dsl"
# What a wheel is not built from: the build copies the checkout without them.
NOT_BUILT = ("build", "dist", "tests", ".*", "*.egg-info", "__pycache__", "site")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Built from a copy: setuptools builds in the source folder (`build/`, `*.egg-info`),
    # and two builds at once in the checkout (`pytest -n`, one per worker) broke each other.
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_BUILT))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("converge_dsl-*.whl")
    return path


def _source_modules() -> set[str]:
    return {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    }


def _missing(source: set[str], names: set[str]) -> list[str]:
    return sorted(source - names)


def test_every_module_of_the_source_tree_is_in_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert _missing(_source_modules(), names) == []
    assert "converge_dsl/py.typed" in names
    assert any(PurePosixPath(n).parent.name == "_report_assets" for n in names)
    assert "converge_dsl/_page_assets/vlist.js" in names  # the pages' shared list
    assert "converge_dsl/_page_assets/page.css" in names  # and their shared style
    assert "converge_dsl/batch/page.css" in names  # the batch page's own


def test_the_module_check_can_fail() -> None:
    assert _missing({"converge_dsl/sandbox/__init__.py"}, set()) == [
        "converge_dsl/sandbox/__init__.py"
    ]


def test_the_unpacked_wheel_validates_and_runs_an_example(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    pipeline = str(ROOT / "pipelines" / "market-entry.yaml")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        # The working folder is not the repository, so `-m` cannot import its sources.
        return subprocess.run(
            [sys.executable, "-m", "converge_dsl", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    where = subprocess.run(
        [sys.executable, "-c", "import converge_dsl.sandbox as s; print(s.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert where.stdout.startswith(str(site)), where.stdout + where.stderr
    validated = cli("validate", pipeline)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    ran = cli("run", pipeline, "--no-cache")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "converged" in ran.stdout
