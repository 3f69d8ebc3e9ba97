"""`.pre-commit-hooks.yaml`: a manifest pre-commit accepts, whose hooks run real commands.

pre-commit's own manifest loader (`pre_commit.clientlib.load_manifest`, the
dev extra) checks the fields; the tests here check what it cannot: each
`entry` is a `converge-dsl` command, and the validate hook's file filter picks
exactly the files a folder scan of `validate` takes as pipelines.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from converge_dsl.cli import COMMANDS, run
from converge_dsl.validation import pipeline_files

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
# `converge-dsl test` is added by the pipeline-test work, merged separately.
NOT_YET = {"test"}


def _hooks() -> dict[str, dict[str, Any]]:
    hooks = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(hooks, list)
    return {hook["id"]: hook for hook in hooks}


def _selects(hook: dict[str, Any], path: str) -> bool:
    """Whether pre-commit would give `path` to `hook` (its `files`/`exclude` and YAML type)."""
    if not path.endswith((".yaml", ".yml")):
        return False
    files, exclude = hook.get("files", ""), hook.get("exclude", "^$")
    return bool(re.search(files, path)) and not re.search(exclude, path)


def test_pre_commit_accepts_the_manifest() -> None:
    from pre_commit.clientlib import load_manifest

    loaded = load_manifest(str(MANIFEST))
    assert [hook["id"] for hook in loaded] == ["converge-dsl-validate", "converge-dsl-test"]
    assert all(hook["language"] == "python" for hook in loaded)


def test_the_manifest_check_can_fail(tmp_path: Path) -> None:
    from pre_commit.clientlib import InvalidManifestError, load_manifest

    broken = tmp_path / "hooks.yaml"
    broken.write_text("- id: x\n  name: x\n  language: python\n", encoding="utf-8")  # no entry
    with pytest.raises(InvalidManifestError):
        load_manifest(str(broken))


@pytest.mark.parametrize("hook_id", ["converge-dsl-validate", "converge-dsl-test"])
def test_each_entry_is_a_converge_dsl_command(hook_id: str) -> None:
    program, command = _hooks()[hook_id]["entry"].split()
    assert program == "converge-dsl"
    if command in NOT_YET and command not in COMMANDS:
        pytest.skip(f"`converge-dsl {command}` is not in this build yet")
    assert command in COMMANDS
    out, err = io.StringIO(), io.StringIO()
    assert run([command, "--help"], out, err) == 0, err.getvalue()


def test_the_validate_hook_gives_validate_the_pipelines_a_folder_scan_finds() -> None:
    hook = _hooks()["converge-dsl-validate"]
    candidates = sorted(
        path.relative_to(ROOT).as_posix()
        for folder in ("pipelines", "builtin_packs", "tests/data/valid")
        for path in (ROOT / folder).rglob("*.y*ml")
    )
    selected = {path for path in candidates if _selects(hook, path)}
    scanned = {
        path.relative_to(ROOT).as_posix()
        for folder in ("pipelines", "tests/data/valid")
        for path in pipeline_files([str(ROOT / folder)])
    }
    assert selected == scanned


@pytest.mark.parametrize(
    ("path", "selected"),
    [
        ("pipelines/support-triage.yaml", True),
        ("review.yml", True),
        ("pipelines/support-triage.script.yaml", False),
        ("pipelines/support-triage.test.yaml", False),
        ("packs/demo/pack.yaml", False),
        (".pre-commit-config.yaml", False),
        (".github/workflows/ci.yml", False),
        ("notes.md", False),
    ],
)
def test_the_validate_hook_filter(path: str, selected: bool) -> None:
    assert _selects(_hooks()["converge-dsl-validate"], path) is selected


def test_the_test_hook_runs_once_for_the_whole_project() -> None:
    hook = _hooks()["converge-dsl-test"]
    assert hook["pass_filenames"] is False
    assert hook["require_serial"] is True
