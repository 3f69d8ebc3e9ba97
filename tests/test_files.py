"""Files a pipeline names stay inside its folder; diagnostics never quote a foreign file.

`converge_dsl._files.referenced_path` through `validate`, `run` and the model
factory: absolute paths, `..`, links out of the folder, FIFOs, devices and hard
links are refused (CD220, CD221) before anything is read; `--allow-root` and
`CONVERGE_DSL_ALLOW_ROOTS` allow a folder. A referenced file that is not a YAML
mapping is reported without quoting it (CD222).
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl._files import ALLOW_ROOTS_ENV, ReferenceRefused, referenced_path, user_roots
from converge_dsl.cli import run
from converge_dsl.clock import FakeClock
from converge_dsl.models import ModelError, build_model

PIPELINES = Path(__file__).resolve().parent.parent / "pipelines"
SECRET = "s3cr3t-first-line"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err)
    return code, out.getvalue(), err.getvalue()


def pipeline(folder: Path, model: str) -> Path:
    """A pipeline in `folder` whose model `m` is `model` (a YAML flow mapping)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "p.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: p\n"
        f"models:\n  m: {model}\n"
        "suggestors:\n  - name: a\n    kind: llm\n    model: m\n    target: hypotheses\n"
        '    prompt: {user: "hi"}\n    output: {format: lines}\n',
        encoding="utf-8",
    )
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A secret file outside the pipeline's folder (`tmp_path/p`)."""
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{SECRET}\nsecond line\n", encoding="utf-8")
    return secret


@pytest.fixture(autouse=True)
def no_env_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_ROOTS_ENV, raising=False)


def _codes(out: str) -> list[str]:
    """The codes of `validate --format json` (a list) or `run --format json` (a run result)."""
    data = json.loads(out)
    diagnostics = data["diagnostics"] if isinstance(data, dict) else data
    return [d["code"] for d in diagnostics]


# --- the payloads -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["validate", "run"])
def test_script_etc_passwd_is_refused_and_never_quoted(tmp_path: Path, command: str) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: /etc/passwd}")
    code, out, err = cli(command, path, "--format", "json")
    assert code == 2
    assert _codes(out) == [codes.REFERENCE_OUTSIDE_ROOTS]
    assert "root:" not in out + err
    code, out, err = cli(command, path)
    assert code == 2
    assert "[CD220]: script file '/etc/passwd' is outside the pipeline's folder" in out + err
    assert "--allow-root DIR" in out + err
    assert "root:" not in out + err


@pytest.mark.parametrize("field", ["script", "cassette"])
def test_dotdot_paths_are_refused_before_reading(tmp_path: Path, outside: Path, field: str) -> None:
    adapter = "scripted" if field == "script" else "replay"
    path = pipeline(tmp_path / "p", f"{{adapter: {adapter}, {field}: ../secret.txt}}")
    for command in ("validate", "run"):
        code, out, err = cli(command, path)
        assert code == 2, err
        assert f"{field} file '../secret.txt' is outside the pipeline's folder" in out + err
        assert SECRET not in out + err


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path, outside: Path) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: sub/s.yaml}")
    (tmp_path / "p" / "sub").mkdir()
    (tmp_path / "p" / "sub" / "s.yaml").symlink_to(outside)
    code, out, _ = cli("validate", path)
    assert code == 2
    assert f"(through a link, to {str(outside)!r})" in out
    assert SECRET not in out


def test_a_linked_folder_out_of_the_pipeline_folder_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: away/secret.txt}")
    (tmp_path / "p" / "away").symlink_to(tmp_path)
    code, out, _ = cli("validate", path, "--format", "json")
    assert (code, _codes(out)) == (2, [codes.REFERENCE_OUTSIDE_ROOTS])


def test_a_record_file_outside_the_folder_is_refused(tmp_path: Path) -> None:
    shutil.copy(PIPELINES / "market-entry.script.yaml", tmp_path / "p.script.yaml")
    path = pipeline(
        tmp_path / "p", "{adapter: scripted, script: ../p.script.yaml, record: /tmp/x.jsonl}"
    )
    code, out, _ = cli("validate", path, "--format", "json")
    assert (code, sorted(_codes(out))) == (2, [codes.REFERENCE_OUTSIDE_ROOTS] * 2)


# --- allowed roots ------------------------------------------------------------------------


def _with_outside_script(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copy(PIPELINES / "market-entry.script.yaml", shared / "s.yaml")
    return pipeline(tmp_path / "p", "{adapter: scripted, script: ../shared/s.yaml}")


def test_allow_root_allows_a_folder_for_validate_and_run(tmp_path: Path) -> None:
    path = _with_outside_script(tmp_path)
    assert cli("validate", path)[0] == 2
    code, out, err = cli("validate", path, "--allow-root", tmp_path / "shared")
    assert (code, out) == (0, "1 file valid\n"), err
    assert cli("run", path)[0] == 2
    code, _, err = cli("run", path, "--allow-root", tmp_path / "shared")
    assert code == 0, err


def test_the_environment_allows_roots_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _with_outside_script(tmp_path)
    monkeypatch.setenv(ALLOW_ROOTS_ENV, os.pathsep.join(["/nowhere", str(tmp_path / "shared")]))
    assert cli("validate", path)[0] == 0
    assert cli("run", path)[0] == 0
    assert user_roots(["/a/../b"], {ALLOW_ROOTS_ENV: "/c::"}) == (Path("/b"), Path("/c"))


def test_a_root_allows_what_is_below_it_only(tmp_path: Path) -> None:
    (tmp_path / "rootx").mkdir()
    (tmp_path / "root").mkdir()
    with pytest.raises(ReferenceRefused):
        referenced_path("../rootx/f", tmp_path / "p", [tmp_path / "root"], field="script file")
    found = referenced_path("../root/f", tmp_path / "p", [tmp_path / "root"], field="f")
    assert found == tmp_path / "root" / "f"


# --- files that are not plain files -------------------------------------------------------


def test_a_fifo_script_is_refused_without_blocking(tmp_path: Path) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: fifo.yaml}")
    os.mkfifo(tmp_path / "p" / "fifo.yaml")
    code, out, _ = cli("validate", path)
    assert code == 2
    assert "[CD221]: script file 'fifo.yaml' is a FIFO, not a regular file" in out


def test_a_hard_link_is_refused(tmp_path: Path, outside: Path) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: s.yaml}")
    os.link(outside, tmp_path / "p" / "s.yaml")
    code, out, _ = cli("validate", path, "--format", "json")
    assert (code, _codes(out)) == (2, [codes.REFERENCE_NOT_REGULAR])
    assert "2 hard links" in out
    assert SECRET not in out


@pytest.mark.parametrize(("adapter", "field"), [("scripted", "script"), ("replay", "cassette")])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_nul_character_in_a_name_is_refused_as_no_file_name(
    tmp_path: Path, adapter: str, field: str, command: str
) -> None:
    path = pipeline(tmp_path / "p", f'{{adapter: {adapter}, {field}: "s\\0.yaml"}}')
    code, out, err = cli(command, path)
    assert code == 2, err
    assert f"[CD221]: {field} file 's\\x00.yaml' holds a NUL character" in out + err
    assert "Traceback" not in out + err


def test_a_folder_as_script_is_still_missing_file(tmp_path: Path) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: d}")
    (tmp_path / "p" / "d").mkdir()
    code, out, _ = cli("validate", path)
    assert code == 2
    assert "[CD210]: script file 'd' is a folder, not a file" in out


# --- no excerpt of a file that is not a YAML mapping --------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (f"{SECRET}\n", codes.REFERENCE_NOT_YAML),  # a single value
        (f"- {SECRET}\n", codes.REFERENCE_NOT_YAML),  # a list
        (f"a: 1\n b: {SECRET}: x\n", codes.YAML_SYNTAX),  # not YAML at all
        (f"{SECRET}\n\xff\n", codes.NOT_UTF8),
    ],
)
def test_a_script_that_is_not_a_yaml_mapping_is_never_quoted(
    tmp_path: Path, text: str, code: str
) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: notes.txt}")
    (tmp_path / "p" / "notes.txt").write_bytes(text.encode("utf-8", "surrogateescape"))
    if "\xff" in text:
        (tmp_path / "p" / "notes.txt").write_bytes(SECRET.encode() + b"\n\xff\n")
    for args in ((), ("--format", "json"), ("--format", "sarif"), ("--format", "github")):
        result, out, err = cli("validate", path, *args)
        assert result == 2
        assert f"[{code}]" in out or f'"{code}"' in out or code in out
        assert SECRET not in out + err


def test_a_script_that_loads_is_still_quoted(tmp_path: Path) -> None:
    path = pipeline(tmp_path / "p", "{adapter: scripted, script: s.yaml}")
    (tmp_path / "p" / "s.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules: 5\n", encoding="utf-8"
    )
    code, out, _ = cli("validate", path)
    assert code == 2
    assert "3 | rules: 5" in out


# --- the factory makes the same refusal at run time ---------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {"adapter": "scripted", "script": "/etc/passwd"},
        {"adapter": "replay", "cassette": "../secret.txt"},
        {"adapter": "scripted", "script": "s.yaml", "record": "../out.jsonl"},
    ],
)
def test_build_model_refuses_files_outside_the_roots(
    tmp_path: Path, outside: Path, config: dict[str, str]
) -> None:
    (tmp_path / "p").mkdir()
    shutil.copy(PIPELINES / "market-entry.script.yaml", tmp_path / "p" / "s.yaml")
    with pytest.raises(ModelError) as caught:
        build_model(
            "m", config, base_dir=tmp_path / "p", env={}, clock=FakeClock(), rng=random.Random(0)
        )
    assert "is outside the pipeline's folder" in caught.value.message
    assert not (tmp_path / "out.jsonl").exists()
