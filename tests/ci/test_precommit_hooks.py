"""`.pre-commit-hooks.yaml`: a manifest pre-commit accepts, whose hooks run real commands.

pre-commit's own manifest loader (`pre_commit.clientlib.load_manifest`, the
dev extra) checks the fields; the tests here check what it cannot: each
`entry` is a `converge-dsl` command line that parses, and the validate hook,
given every YAML file, checks exactly the pipelines a folder scan finds.
"""

from __future__ import annotations

import io
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from converge_dsl._file_kinds import OTHER_KINDS
from converge_dsl.cli import COMMANDS, run
from converge_dsl.cli._discovery import pipeline_files

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
# `converge-dsl test` is added by the pipeline-test work, merged separately.
NOT_YET = {"test"}
PIPELINE = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: p\nsugestors: []\n"


def _hooks() -> dict[str, dict[str, Any]]:
    hooks = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(hooks, list)
    return {hook["id"]: hook for hook in hooks}


def _validate_hook(*files: str) -> tuple[int, str]:
    """What the validate hook runs: its entry, then the file names pre-commit passes."""
    entry = shlex.split(_hooks()["converge-dsl-validate"]["entry"])
    out, err = io.StringIO(), io.StringIO()
    code = run([*entry[1:], *files], out, err)
    return code, out.getvalue() + err.getvalue()


def test_pre_commit_accepts_the_manifest() -> None:
    from pre_commit.clientlib import load_manifest

    loaded = load_manifest(str(MANIFEST))
    assert [hook["id"] for hook in loaded] == ["converge-dsl-validate", "converge-dsl-test"]
    assert all(hook["language"] == "python" for hook in loaded)
    assert all(hook["types_or"] == ["yaml"] for hook in loaded)


def test_the_manifest_check_can_fail(tmp_path: Path) -> None:
    from pre_commit.clientlib import InvalidManifestError, load_manifest

    broken = tmp_path / "hooks.yaml"
    broken.write_text("- id: x\n  name: x\n  language: python\n", encoding="utf-8")  # no entry
    with pytest.raises(InvalidManifestError):
        load_manifest(str(broken))


@pytest.mark.parametrize("hook_id", ["converge-dsl-validate", "converge-dsl-test"])
def test_each_entry_is_a_converge_dsl_command(hook_id: str) -> None:
    program, command, *options = shlex.split(_hooks()[hook_id]["entry"])
    assert program == "converge-dsl"
    if command in NOT_YET and command not in COMMANDS:
        pytest.skip(f"`converge-dsl {command}` is not in this build yet")
    assert command in COMMANDS
    out, err = io.StringIO(), io.StringIO()
    assert run([command, *options, "--help"], out, err) == 0, err.getvalue()


def test_given_every_yaml_file_the_hook_checks_what_a_folder_scan_finds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    every = sorted(
        path.relative_to(ROOT).as_posix()
        for folder in ("pipelines", "builtin_packs", "tests/data/valid")
        for path in (ROOT / folder).rglob("*.y*ml")
    )
    given = {p.as_posix() for p in pipeline_files(every, only_pipelines=True)}
    scanned = {
        p.relative_to(ROOT).as_posix()
        for folder in ("pipelines", "tests/data/valid")
        for p in pipeline_files([str(ROOT / folder)])
    }
    assert given == scanned
    assert _validate_hook(*every)[0] == 0


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("docker-compose.yml", "services:\n  web: {image: nginx}\n"),
        ("chart/templates/deploy.yaml", "kind: Deployment\nspec: {{ .Values.spec }}\n"),
        ("k8s.yaml", "apiVersion: apps/v1\nkind: Deployment\n"),
        ("tekton.yaml", "apiVersion: tekton.dev/v1\nkind: Pipeline\nspec: {tasks: []}\n"),
        ("quoted.yaml", '"apiVersion": "tekton.dev/v1beta1"\n"kind": "Pipeline"\n'),
        ("p.script.yaml", "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules: []\n"),
        ("mkdocs.yml", "site_name: x\n"),
    ],
)
def test_other_yaml_files_pass_the_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str
) -> None:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert _validate_hook(name) == (0, "0 files valid\n")


@pytest.mark.parametrize(
    "text",
    [
        PIPELINE,
        "{apiVersion: converge-dsl/v1, kind: Pipeline, name: p, sugestors: []}\n",
        "kind: Pipeline\nname: p\nsugestors: []\n",  # no apiVersion: still ours
        '"apiVersion": "converge-dsl/v2"\nkind: Pipline\n',  # misspelled kind
        "apiVersion: converge-dls/v1\nkind: Pipeline\nname: p\n",  # misspelled API
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: [\n",  # does not load
    ],
)
def test_a_broken_pipeline_fails_the_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    (tmp_path / "p.yaml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out = _validate_hook("p.yaml")
    assert code == 2, out
    assert "p.yaml:" in out


def test_a_test_file_passes_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if "PipelineTest" not in OTHER_KINDS:
        pytest.skip("pipeline tests are not in this build yet")
    (tmp_path / "p.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: p.yaml\ncases: []\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    assert _validate_hook("p.test.yaml") == (0, "0 files valid\n")


def test_the_test_hook_runs_once_for_the_whole_project() -> None:
    hook = _hooks()["converge-dsl-test"]
    assert hook["pass_filenames"] is False
    assert hook["require_serial"] is True
