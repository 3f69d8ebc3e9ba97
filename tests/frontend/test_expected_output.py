"""Every invalid pipeline gives exactly its expected human output; valid ones pass."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from converge_dsl.cli import run

DATA = Path(__file__).resolve().parent.parent / "data"
INVALID = sorted(
    p for p in (DATA / "invalid").glob("*.yaml") if not p.name.endswith(".script.yaml")
)
VALID = sorted(
    p for p in (DATA / "valid").glob("*.yaml") if "kind: Pipeline" in p.read_text("utf-8")
)


def _validate(folder: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.chdir(folder)
    out, err = io.StringIO(), io.StringIO()
    code = run(["validate", name], out, err)
    return code, out.getvalue() + err.getvalue()


def test_there_are_at_least_40_invalid_pipelines() -> None:
    assert len(INVALID) >= 40


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_pipeline_matches_expected_output(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, output = _validate(path.parent, path.name, monkeypatch)
    expected = path.with_suffix(".expected").read_text(encoding="utf-8")
    assert output == expected
    has_error = "\nerror[" in "\n" + output
    assert code == (2 if has_error else 0)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_pipeline_has_no_diagnostics(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _validate(path.parent, path.name, monkeypatch)
    assert (code, output) == (0, "1 file valid\n")


def test_every_code_is_documented_and_exercised() -> None:
    from converge_dsl.frontend import _codes

    docs = (DATA.parent.parent / "docs" / "errors.md").read_text(encoding="utf-8")
    outputs = "".join(p.with_suffix(".expected").read_text("utf-8") for p in INVALID)
    codes = [v for k, v in vars(_codes).items() if k.isupper()]
    assert len(codes) >= 40
    for code in codes:
        assert f"## {code}" in docs, code
        if code not in (_codes.TOO_LARGE, _codes.UNREADABLE):  # covered in test_loader
            assert f"[{code}]" in outputs, code
