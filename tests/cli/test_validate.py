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


def _validate(folder: Path, *flags: str, path: str = ".") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(folder)
    try:
        code = run([*flags, "validate", path], out, err)
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


def test_a_folder_of_other_kinds_only_says_what_it_skipped_and_what_takes_them(
    folder: Path,
) -> None:
    # It said "no pipeline files found" and where a folder is searched: never that it
    # held a test and a model script, nor what takes them.
    only = folder / "only"
    only.mkdir()
    for name in ("ticket.script.yaml", "review.test.yaml"):
        (folder / name).rename(only / name)
    code, out, err = _validate(folder, path="only")
    assert (code, out) == (3, "")
    assert err == (
        "error[CD334]: no pipeline files found in only\n"
        "  hint: it holds only files of other kinds, skipped: only/review.test.yaml (a "
        "pipeline test file; run it with `converge-dsl test only/review.test.yaml`), "
        "only/ticket.script.yaml (a model script; a pipeline's model answers from it: "
        "`adapter: scripted, script: only/ticket.script.yaml`)\n"
    )


_BROKEN = "apiVersion: converge-dsl/v1\nkind: Pipeline\n"


def test_a_walk_enters_no_hidden_folder_or_environment_and_counts_a_link_once(
    folder: Path,
) -> None:
    # It checked the broken pipelines under `.git`, `.venv`, a virtual environment of
    # another name and `node_modules`, and counted a link beside the file it names.
    for inside in (".git", ".venv/lib", "env/lib", "node_modules/tool"):
        (folder / inside).mkdir(parents=True)
        (folder / inside / "broken.yaml").write_text(_BROKEN)
    (folder / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (folder / "linked").mkdir()
    (folder / "linked" / "ticket.yaml").symlink_to(folder / "ticket.yaml")
    (folder / "again.script.yaml").symlink_to(folder / "ticket.script.yaml")
    test_a_folder_walk_says_how_many_files_of_other_kinds_it_skipped(folder)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("review.test.yaml", "a pipeline test file (kind: PipelineTest)"),
        ("ticket.script.yaml", "a model script (kind: ModelScript)"),
        ("manifest.yaml", "a pack manifest (kind: Pack)"),
    ],
)
def test_a_file_of_another_kind_named_directly_is_refused_as_run_refuses_it(
    folder: Path, name: str, what: str
) -> None:
    # It was checked as a pipeline: five schema errors, exit 2; `run` says CD818.
    code, _, err = _validate(folder, path=name)
    assert code == 3
    assert f"error[CD818]: this is {what}, not a pipeline\n" in err


def test_an_evaluation_of_any_name_named_directly_is_checked_as_an_evaluation(
    folder: Path,
) -> None:
    assert _validate(folder, path="renamed-eval.yaml")[:2] == (0, "1 file valid\n")


def test_a_pipeline_saying_another_kind_is_checked_by_a_walk_as_named(folder: Path) -> None:
    # With pipeline keys it is a pipeline of a wrong kind (`refuse_other_kind`): named,
    # it got CD103; a walk skipped it as a pipeline test.
    text = (folder / "ticket.yaml").read_text().replace("kind: Pipeline", "kind: PipelineTest")
    (folder / "ticket.yaml").write_text(text)
    code, out, err = _validate(folder)
    assert (code, err.partition(" (")[0]) == (2, "skipped 5 file(s) of other kinds")
    assert "error[CD103]: kind: 'PipelineTest' is not allowed\n --> ticket.yaml:" in out
    named = _validate(folder, path="ticket.yaml")
    assert (named[0], named[1].partition("\n\n")[0]) == (code, out.partition("\n\n")[0])
