"""Every command reads the environment handed to `cli.run`, never the process's.

Each test hands `run` an environment that differs from the process's (the
variable is unset in the process, or names another folder) and checks that
the command obeyed the one it was handed: the file-size cap, the answer cache
mode, the answer cache and pack cache folders, the compile cache folder.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.cli import run
from converge_dsl.models.answer_store import STORE_FILE

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ROOT / "pipelines"
TRIAGE = PIPELINES / "incident-triage.yaml"
STAFFING = PIPELINES / "staffing-plan.yaml"
SMALL_CAP = {"CONVERGE_DSL_MAX_FILE_BYTES": "10"}
BAD_MODE = {"CONVERGE_DSL_CACHE_MODE": "bogus"}


@pytest.fixture(autouse=True)
def _process_environment_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables handed below are not set in the process."""
    for name in (*SMALL_CAP, *BAD_MODE, "CONVERGE_DSL_ALLOW_ROOTS"):
        monkeypatch.delenv(name, raising=False)


def handed(**extra: str) -> dict[str, str]:
    """The process's environment (its private caches, see tests/conftest.py) and `extra`."""
    return {**os.environ, "NO_COLOR": "1", **extra}


def cli(argv: list[str | Path], environ: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run([str(a) for a in argv], out, err, environ)
    return code, out.getvalue(), err.getvalue()


def copy_pipeline(source: Path, folder: Path) -> Path:
    """`source` and its model script in `folder` (a lock written there stays there)."""
    shutil.copy(source, folder / source.name)
    script = source.with_name(source.stem + ".script.yaml")
    shutil.copy(script, folder / script.name)
    return folder / source.name


def filled(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def cases_file(folder: Path) -> Path:
    path = folder / "cases.jsonl"
    path.write_text('{"id": "a"}\n', encoding="utf-8")
    return path


def _serve_argv(tmp_path: Path) -> list[str | Path]:
    return ["serve", TRIAGE, "--state", tmp_path / "state"]


@pytest.fixture
def prepare_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve` loads and checks what it serves (`prepare`), then returns without binding."""
    import converge_dsl.serve
    from converge_dsl.serve._server import ServeOptions, prepare

    def serve(options: ServeOptions, on_url: object) -> None:
        prepare(options).service.store.close()

    monkeypatch.setattr(converge_dsl.serve, "serve", serve)


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", TRIAGE],
        ["plan", PIPELINES / "agent-review.yaml"],
        ["graph", TRIAGE],
        ["run", TRIAGE],
        ["test", PIPELINES / "incident-triage.test.yaml"],
        ["eval", PIPELINES / "support-triage" / "triage.eval.yaml"],
    ],
    ids=lambda argv: str(argv[0]),
)
def test_the_file_size_cap_is_the_handed_environments(argv: list[str | Path]) -> None:
    assert cli(argv, handed())[0] == 0
    code, out, err = cli(argv, handed(**SMALL_CAP))
    assert code == 2
    assert f"[{codes.TOO_LARGE}]" in out + err
    assert "the limit is 10" in out + err


def test_a_batch_loads_its_pipeline_in_the_handed_environment(tmp_path: Path) -> None:
    argv: list[str | Path] = ["run", TRIAGE, "--cases", cases_file(tmp_path)]
    assert cli([*argv, "--out", tmp_path / "first.jsonl"], handed())[0] == 0
    code, _, err = cli([*argv, "--out", tmp_path / "out.jsonl"], handed(**SMALL_CAP))
    assert code == 2
    assert f"[{codes.TOO_LARGE}]" in err


@pytest.mark.usefixtures("prepare_only")
def test_serve_loads_its_pipelines_in_the_handed_environment(tmp_path: Path) -> None:
    assert cli(_serve_argv(tmp_path), handed())[0] == 0
    code, _, err = cli(_serve_argv(tmp_path), handed(**SMALL_CAP))
    assert code == 2
    assert f"[{codes.TOO_LARGE}]" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", TRIAGE],
        ["run", TRIAGE, "--cases", "CASES", "--out", "OUT"],
        ["eval", PIPELINES / "support-triage" / "triage.eval.yaml"],
        ["test", PIPELINES / "incident-triage.test.yaml"],
    ],
    ids=["run", "run --cases", "eval", "test"],
)
def test_the_answer_cache_mode_is_the_handed_environments(
    argv: list[str | Path], tmp_path: Path
) -> None:
    argv = [
        cases_file(tmp_path) if a == "CASES" else tmp_path / "out.jsonl" if a == "OUT" else a
        for a in argv
    ]
    code, _, err = cli(argv, handed(**BAD_MODE))
    assert code == 3
    assert f"[{codes.CACHE_BAD_MODE}]" in err
    assert "CONVERGE_DSL_CACHE_MODE='bogus'" in err


@pytest.mark.parametrize("command", ["validate", "plan", "run"])
def test_the_allowed_roots_are_the_handed_environments(command: str, tmp_path: Path) -> None:
    """The model script lies outside the pipeline's folder, in a root only the handed
    environment allows (`CONVERGE_DSL_ALLOW_ROOTS`)."""
    outside = tmp_path / "scripts"
    outside.mkdir()
    shutil.copy(PIPELINES / "agent-review.script.yaml", outside / "agent-review.script.yaml")
    folder = tmp_path / "pipeline"
    folder.mkdir()
    pipeline = folder / "agent-review.yaml"
    text = (PIPELINES / "agent-review.yaml").read_text(encoding="utf-8")
    pipeline.write_text(
        text.replace(
            "script: agent-review.script.yaml", f"script: {outside}/agent-review.script.yaml"
        )
    )
    code, out, err = cli([command, pipeline], handed())
    assert code == 2
    assert f"[{codes.REFERENCE_OUTSIDE_ROOTS}]" in out + err
    code, out, err = cli([command, pipeline], handed(CONVERGE_DSL_ALLOW_ROOTS=str(outside)))
    assert code == 0, out + err


def test_a_tool_servers_folder_may_lie_in_a_root_of_the_handed_environment(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "work"
    outside.mkdir()
    pipeline = tmp_path / "pipeline" / "tools.yaml"
    pipeline.parent.mkdir()
    pipeline.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: tools\n"
        f"tools:\n  time: {{command: [mcp-server-time], cwd: {outside}, allow: [now]}}\n"
        "suggestors:\n  - {name: s, kind: seed, target: seeds, facts: [{id: a, content: a}]}\n",
        encoding="utf-8",
    )
    code, out, _ = cli(["validate", pipeline], handed())
    assert code == 2
    assert f"[{codes.TOOL_CWD_REFUSED}]" in out
    code, out, _ = cli(["validate", pipeline], handed(CONVERGE_DSL_ALLOW_ROOTS=str(outside)))
    assert code == 0, out


def test_lsp_analyses_in_the_handed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server reads the environment it is given (tests/lsp/test_server.py); here, that
    `lsp` gives it the handed one (the standard streams it serves are the process's)."""
    import converge_dsl.lsp

    given: list[object] = []

    def serve(explain: object, environ: object = None) -> None:
        given.append(environ)

    monkeypatch.setattr(converge_dsl.lsp, "serve", serve)
    environ = handed(**SMALL_CAP)
    assert cli(["lsp"], environ)[0] == 0
    assert given == [environ]


def test_a_run_configuration_is_read_under_the_handed_environments_cap(tmp_path: Path) -> None:
    config = tmp_path / "dev.run.yaml"
    config.write_text(
        "apiVersion: converge-dsl/v1\nkind: RunConfig\ncache: {mode: read-only}\n",
        encoding="utf-8",
    )
    for command in (["run", TRIAGE, "--config", config], ["validate", config]):
        assert cli(command, handed())[0] == 0
        code, out, err = cli(command, handed(CONVERGE_DSL_MAX_FILE_BYTES="20"))
        assert code == 2
        assert f"error[{codes.TOO_LARGE}]: file is 69 bytes; the limit is 20" in out + err
        assert "dev.run.yaml:1:1" in out + err


def test_cache_reads_the_folder_of_the_handed_environment(tmp_path: Path) -> None:
    code, out, _ = cli(
        ["cache", "stats", "--format", "json"], handed(CONVERGE_DSL_CACHE=str(tmp_path))
    )
    assert code == 0
    assert json.loads(out)["location"] == str(tmp_path / "answers" / STORE_FILE)


def test_run_compiles_into_the_cache_of_the_handed_environment(tmp_path: Path) -> None:
    code, _, err = cli(["run", TRIAGE], handed(CONVERGE_DSL_CACHE=str(tmp_path)))
    assert code == 0, err
    assert filled(tmp_path / "compiled")


def test_run_fetches_packs_into_the_cache_of_the_handed_environment(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    code, _, err = cli(["run", STAFFING, "--format", "json"], handed(CONVERGE_DSL_CACHE=str(cache)))
    assert code == 0, err
    assert "fetched pack optimization 1.0.0 from builtin" in err
    assert filled(cache / "unpacked")
    assert len(list((cache / "unpacked").iterdir())) == 2


def test_validate_reads_packs_from_the_cache_of_the_handed_environment(tmp_path: Path) -> None:
    assert cli(["validate", STAFFING], handed())[0] == 0
    code, out, _ = cli(["validate", STAFFING], handed(CONVERGE_DSL_CACHE=str(tmp_path)))
    assert code == 2
    assert f"[{codes.PACK_NOT_FETCHED}]" in out


@pytest.mark.parametrize(
    "action",
    [
        ["lock", "PIPELINE"],
        ["pack", "fetch", "PIPELINE"],
        ["pack", "verify", "PIPELINE"],
        ["pack", "add", "optimization", "TRIAGE"],
    ],
    ids=lambda action: " ".join(action[:-1]),
)
def test_packs_go_into_the_cache_of_the_handed_environment(
    action: list[str], tmp_path: Path
) -> None:
    pipeline = copy_pipeline(STAFFING, tmp_path)
    triage = copy_pipeline(TRIAGE, tmp_path)
    shutil.copy(PIPELINES / "converge.lock", tmp_path / "converge.lock")
    argv: list[str | Path] = [
        {"PIPELINE": pipeline, "TRIAGE": triage}.get(word, word) for word in action
    ]
    cache = tmp_path / "cache"
    code, _, err = cli(argv, handed(CONVERGE_DSL_CACHE=str(cache)))
    assert code == 0, err
    assert filled(cache / "archives")
    assert filled(cache / "unpacked")


def padded_script(folder: Path) -> Path:
    """The triage pipeline in `folder`, its model script padded to 6,000 bytes (the
    pipeline is about 2,000): a cap of 4,000 refuses the script alone."""
    pipeline = copy_pipeline(TRIAGE, folder)
    script = folder / "incident-triage.script.yaml"
    text = script.read_text(encoding="utf-8")
    script.write_text(text + "#" * (6000 - len(text)) + "\n", encoding="utf-8")
    return pipeline


@pytest.mark.parametrize("command", ["validate", "run", "test"])
def test_a_model_script_is_read_under_the_handed_environments_cap(
    command: str, tmp_path: Path
) -> None:
    pipeline = padded_script(tmp_path)
    target = pipeline
    if command == "test":
        target = tmp_path / "triage.test.yaml"
        target.write_text(
            "apiVersion: converge-dsl/v1\nkind: PipelineTest\n"
            f"pipeline: {pipeline.name}\n"
            "models: {analyst: {script: incident-triage.script.yaml}}\n"
            "cases: [{name: c, expect: {stop_reason: converged}}]\n",
            encoding="utf-8",
        )
    assert cli([command, target], handed())[0] == 0
    code, out, err = cli([command, target], handed(CONVERGE_DSL_MAX_FILE_BYTES="4000"))
    assert code == 2, out + err
    assert f"[{codes.TOO_LARGE}]" in out + err
    assert "the limit is 4000" in out + err
    assert "incident-triage.script.yaml" in out + err
