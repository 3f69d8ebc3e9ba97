"""The corpus of data-flow mistakes: each caught by `validate`, exactly as its expected output.

`tests/data/dataflow/NAME.yaml` is a small support-triage pipeline with one mistake
(a key, a dependency, a field, a type, a run that cannot work); `NAME.expected` is the
human output of `validate NAME.yaml`: code, line, column, excerpt and hint. None is a
traceback, and every one is found before anything runs.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from converge_dsl.cli import run

CORPUS = Path(__file__).resolve().parent.parent / "data" / "dataflow"
MISTAKES = sorted(p for p in CORPUS.glob("*.yaml") if not p.name.endswith(".script.yaml"))
FINDING = re.compile(r"^(error|warning|note)\[(CD\d{3})\]", re.M)


def _validate(path: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    monkeypatch.chdir(path.parent)
    out, err = io.StringIO(), io.StringIO()
    code = run(["validate", *args, path.name], out, err)
    return code, out.getvalue() + err.getvalue()


def test_the_corpus_has_at_least_25_mistakes() -> None:
    assert len(MISTAKES) >= 25


@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: p.stem)
def test_each_mistake_is_caught_as_expected(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = _validate(path, monkeypatch)
    assert output == path.with_suffix(".expected").read_text(encoding="utf-8")
    assert "Traceback" not in output
    kinds = {severity for severity, _ in FINDING.findall(output)}
    assert kinds, "nothing was caught"
    assert code == (2 if "error" in kinds else 0)
    strict, _ = _validate(path, monkeypatch, "--strict")
    assert strict == (2 if "error" in kinds else 1 if "warning" in kinds else 0)


@pytest.mark.parametrize("path", MISTAKES, ids=lambda p: p.stem)
def test_each_finding_has_a_whole_span(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an editor needs: a start and an end on the marked text."""
    _, output = _validate(path, monkeypatch, "--format", "json")
    lines = path.read_text(encoding="utf-8").splitlines()
    for finding in json.loads(output):
        assert finding["end_line"] == finding["line"]
        assert finding["end_column"] > finding["column"]
        marked = lines[finding["line"] - 1][finding["column"] - 1 : finding["end_column"] - 1]
        assert marked
        assert marked.strip() == marked
