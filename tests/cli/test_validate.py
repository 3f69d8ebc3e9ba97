"""`validate FOLDER`: what a folder walk checks, and what it says of the files it skips."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected"


def _validate(folder: Path, *flags: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(folder)
    try:
        code = run([*flags, "validate", "."], out, err)
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A pipeline, and beside it a file of each kind a folder walk checks or skips."""
    for source, name in (
        ("pipelines/support-triage/ticket.yaml", "ticket.yaml"),
        ("pipelines/support-triage/ticket.script.yaml", "ticket.script.yaml"),
        ("pipelines/support-triage/tickets.jsonl", "tickets.jsonl"),
        ("pipelines/support-triage/triage.eval.yaml", "triage.eval.yaml"),
        ("pipelines/support-triage/judge.script.yaml", "judge.script.yaml"),
        ("pipelines/agent-review.test.yaml", "review.test.yaml"),
        ("pipelines/support-triage/triage.eval.yaml", "renamed-eval.yaml"),
        ("builtin_packs/optimization/pack.yaml", "manifest.yaml"),
        ("tests/frontend/data/dir-is-a-file.run.yaml", "fast.run.yaml"),
    ):
        shutil.copyfile(ROOT / source, tmp_path / name)
    return tmp_path


def test_a_folder_walk_says_how_many_files_of_other_kinds_it_skipped(folder: Path) -> None:
    # They were left out without a word: a test or a model script could be taken for
    # a file `validate .` had checked.
    code, out, err = _validate(folder)
    assert (code, out) == (0, "3 files valid\n")
    assert err == (
        "skipped 5 file(s) of other kinds (1 Evaluation, 2 ModelScript, 1 Pack, "
        "1 PipelineTest); --verbose names each and what takes it\n"
    )
    assert _validate(folder, "--quiet")[2] == ""


def test_verbose_names_each_skipped_file_and_what_takes_it(folder: Path) -> None:
    code, _, err = _validate(folder, "--verbose")
    assert code == 0
    path = EXPECTED / "validate-folder-skipped.txt"
    if os.environ.get("UPDATE_EXPECTED"):
        path.write_text(err, encoding="utf-8")
    assert err == path.read_text(encoding="utf-8")
