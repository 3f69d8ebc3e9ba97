from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run

DATA = Path(__file__).resolve().parent.parent / "data"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return run(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _in_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)


def test_folders_are_expanded_and_non_pipelines_skipped() -> None:
    code, out, _ = _run("validate", "valid")
    assert (code, out) == (0, "4 files valid\n")


def test_exit_codes() -> None:
    assert _run("validate", "invalid/unused_model.yaml")[0] == 0
    assert _run("validate", "--strict", "invalid/unused_model.yaml")[0] == 1
    assert _run("validate", "invalid/duplicate_key.yaml")[0] == 2
    code, _, err = _run("validate", "no/such.yaml")
    assert code == 3
    assert "no such file" in err
    assert _run("validate", "--format", "xml", "valid")[0] == 3


def test_json_format_has_exactly_the_promised_keys() -> None:
    code, out, _ = _run("validate", "--format", "json", "invalid/many_errors.yaml")
    found = json.loads(out)
    assert code == 2
    assert len(found) == 4
    assert set(found[0]) == {
        "code",
        "severity",
        "message",
        "file",
        "line",
        "column",
        "end_line",
        "end_column",
        "path",
        "hint",
    }
    assert found[0]["path"] == "sugestors"


def test_github_format() -> None:
    _, out, _ = _run("validate", "--format", "github", "invalid/unknown_top_key.yaml")
    assert out.startswith("::error file=invalid/unknown_top_key.yaml,line=4,col=1,")
    assert "title=CD100::unknown key 'sugestors'" in out


def test_sarif_format() -> None:
    _, out, _ = _run("validate", "--format", "sarif", "invalid/never_runs.yaml")
    log = json.loads(out)
    assert log["version"] == "2.1.0"
    result = log["runs"][0]["results"][0]
    assert (result["ruleId"], result["level"]) == ("CD300", "warning")
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 5


def test_schema_command_prints_the_pipeline_schema() -> None:
    code, out, _ = _run("schema", "pipeline")
    assert code == 0
    assert json.loads(out)["$id"].endswith("pipeline.v1.json")
    code, _, err = _run("schema", "pipelin")
    assert code == 3
    assert "did you mean 'pipeline'?" in err


def test_colour_only_when_asked() -> None:
    from converge_dsl.frontend import check_pipeline, render_human

    checked = check_pipeline(Path("invalid/duplicate_key.yaml"))
    sources = {"invalid/duplicate_key.yaml": Path("invalid/duplicate_key.yaml").read_text()}
    assert "\x1b[" in render_human(checked.diagnostics, sources, color=True)
    assert "\x1b[" not in render_human(checked.diagnostics, sources, color=False)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("typo.yaml", "apiVersion: converge-dsl/v1\nkind: Pipline\nname: typo\n"),
        ("flow.yaml", "{apiVersion: converge-dsl/v1, kind: Pipeline, name: f, bogus: 1}\n"),
        ("bom.yaml", "\ufeffkind: Pipeline\napiVersion: converge-dsl/v1\nname: b\nbogus: 1\n"),
        ("quoted.yaml", 'apiVersion: converge-dsl/v1\n"kind": Pipeline\nname: q\nbogus: 1\n'),
        ("anchor.yaml", "apiVersion: converge-dsl/v1\nkind: &k Pipeline\nname: a\nbogus: 1\n"),
        ("nokind.yaml", "apiVersion: converge-dsl/v1\nname: n\nseeds: [{id: a, content: b}]\n"),
        ("broken.yaml", "kind: [Pack\n"),
        ("listkind.yaml", "apiVersion: converge-dsl/v1\nkind: [Pipeline]\nname: l\n"),
        ("mapkind.yaml", "apiVersion: converge-dsl/v1\nkind: {a: 1}\nname: m\n"),
    ],
)
def test_folder_reports_broken_pipelines_it_cannot_recognise(
    tmp_path: Path, name: str, text: str
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "m.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules: []\n", encoding="utf-8"
    )
    (tmp_path / "ci.yml").write_text("on: push\njobs: {}\n", encoding="utf-8")
    code, out, _ = _run("validate", str(tmp_path))
    assert code == 2
    assert f"{name}:" in out
    assert out.endswith("in 1 file\n")


def test_folder_with_no_pipeline_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "m.script.yaml").write_text("kind: ModelScript\nrules: []\n", encoding="utf-8")
    (tmp_path / "notes.yaml").write_text("kind: Pack\nname: p\n", encoding="utf-8")  # no manifest
    code, _, err = _run("validate", str(tmp_path))
    assert code == 3
    assert f"no pipeline files found in {tmp_path}" in err


def test_a_folder_with_a_pack_manifest_checks_the_pack(tmp_path: Path) -> None:
    (tmp_path / "pack.yaml").write_text("kind: Pack\nname: p\n", encoding="utf-8")
    code, out, _ = _run("validate", str(tmp_path))
    assert code == 2
    assert "pack.yaml:1:1" in out


MY_PACK = DATA / "docs" / "my-pack"


def test_a_pack_is_checked_as_publish_checks_it(tmp_path: Path) -> None:
    assert _run("validate", str(MY_PACK)) == (0, "1 file valid\n", "")
    assert _run("validate", str(MY_PACK / "pack.yaml"))[0] == 0
    broken = tmp_path / "my-pack"
    import shutil

    shutil.copytree(MY_PACK, broken)
    text = (broken / "pack.yaml").read_text(encoding="utf-8")
    (broken / "pack.yaml").write_text(text.replace("version: 1.0.0", "version: one"), "utf-8")
    (broken / "schemas" / "tasks.input.json").unlink()
    code, out, _ = _run("validate", "--format", "json", str(broken))
    found = json.loads(out)
    assert code == 2
    assert [d["code"] for d in found] == ["CD104"]  # the schema stage stops first
    assert found[0]["file"].endswith("my-pack/pack.yaml")
    assert found[0]["line"] == 6
    (broken / "pack.yaml").write_text(text, "utf-8")
    code, out, _ = _run("validate", "--format", "json", str(broken))
    assert code == 2
    assert [d["code"] for d in json.loads(out)] == ["CD552"]


def test_a_folder_of_pipelines_and_packs_checks_both(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(MY_PACK, tmp_path / "packs" / "my-pack")
    shutil.copy(DATA / "docs" / "pipeline.yaml", tmp_path / "pipeline.yaml")
    assert _run("validate", str(tmp_path)) == (0, "2 files valid\n", "")
    # The pre-commit hook's --only-pipelines still leaves packs alone.
    manifest = str(tmp_path / "packs" / "my-pack" / "pack.yaml")
    assert _run("validate", "--only-pipelines", manifest) == (0, "0 files valid\n", "")


def test_a_file_name_with_a_newline_is_located_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The human `-->` line escapes the name (`\\n`); JSON's `file` is the real name."""
    import os

    monkeypatch.chdir(tmp_path)
    name = "line\nbreak.yaml"
    (tmp_path / name).write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: x\nbogus: 1\nsuggestors: []\n"
    )
    code, out, _ = _run("validate", name)
    assert code == 2
    expected = Path(__file__).parent / "expected" / "validate-newline-name.txt"
    if os.environ.get("UPDATE_EXPECTED") == "1":
        expected.write_text(out, encoding="utf-8")
    assert out == expected.read_text(encoding="utf-8")
    code, out, _ = _run("validate", "--format", "json", name)
    assert [d["file"] for d in json.loads(out)] == [name]
