"""`pack add` edits the pipeline's bytes as they are: CRLF, a BOM, a link and the mode survive."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.packs import publish

from .conftest import make_pack

LINES = [
    "# a pipeline written on Windows",
    "apiVersion: converge-dsl/v1",
    "kind: Pipeline",
    "name: demo   # the name",
    "suggestors:",
    "  - {name: greet, kind: seed, facts: [{id: hi, content: hello}]}",
]
BOM = b"\xef\xbb\xbf"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    publish(make_pack(tmp_path, "alpha", "1.4.0"), tmp_path / "repo")
    (tmp_path / "proj").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path / "proj" / "pipeline.yaml"


def _add(pipeline: Path, *words: str) -> int:
    argv = ["pack", "add", *words, str(pipeline), "--cache", "cache", "--repo", "repo"]
    return run(argv, io.StringIO(), io.StringIO(), {})


@pytest.mark.parametrize("bom", [b"", BOM], ids=["plain", "bom"])
def test_crlf_line_ends_and_a_bom_are_kept(project: Path, bom: bytes) -> None:
    project.write_bytes(bom + "".join(f"{line}\r\n" for line in LINES).encode())
    assert _add(project, "alpha") == 0
    data = project.read_bytes()
    assert data.startswith(bom + b"# a pipeline")
    assert data.count(b"\n") == data.count(b"\r\n")
    new = data[len(bom) :].decode().split("\r\n")
    added = ["packs:", "  alpha: '>=1.4,<2'", "repositories:", "  - builtin", "  - {path: ../repo}"]
    assert new == [*LINES[:4], *added, *LINES[4:], ""]


@pytest.mark.parametrize("bom", [b"", BOM], ids=["plain", "bom"])
def test_a_failed_lock_restores_the_bytes_exactly(project: Path, bom: bytes) -> None:
    before = bom + "".join(f"{line}\r\n" for line in LINES).encode()
    project.write_bytes(before)
    assert _add(project, "nosuch", ">=1") == 1  # fails at the lock, after the edit
    assert project.read_bytes() == before


def test_a_linked_pipeline_stays_a_link_and_keeps_its_mode(project: Path) -> None:
    real = project.parent / "real.yaml"
    real.write_text("".join(f"{line}\n" for line in LINES))
    real.chmod(0o640)
    project.symlink_to("real.yaml")
    assert _add(project, "alpha") == 0
    assert project.is_symlink()
    assert "alpha: '>=1.4,<2'" in real.read_text()
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o640
    assert sorted(p.name for p in project.parent.iterdir()) == [
        "converge.lock",
        "pipeline.yaml",
        "real.yaml",
    ]


@pytest.mark.parametrize("name", ["Bad Name", "../x", "a/b"])
def test_a_name_that_is_no_pack_name_is_refused_before_the_file_is_touched(
    project: Path, name: str
) -> None:
    before = "".join(f"{line}\n" for line in LINES).encode()
    project.write_bytes(before)
    out, err = io.StringIO(), io.StringIO()
    argv = ["pack", "add", name, ">=1", str(project), "--cache", "cache", "--format", "json"]
    assert run(argv, out, err, {}) == 1
    assert out.getvalue().startswith('{\n  "error": {')
    assert f"{name!r} is not a pack name" in err.getvalue()
    assert project.read_bytes() == before
