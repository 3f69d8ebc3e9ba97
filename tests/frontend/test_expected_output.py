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


@pytest.fixture(autouse=True)
def pack_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pack examples install from tests/data/invalid/pack-repo into a fresh cache."""
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))


def _validate(folder: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """`validate` after `pack fetch`, as a user does (validate reads packs from the cache only).

    The fetch may fail (no lock, a stale lock, a digest mismatch): validate reports why.
    """
    monkeypatch.chdir(folder)
    run(["pack", "fetch", name], io.StringIO(), io.StringIO())
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


def test_every_code_validate_can_report_is_exercised() -> None:
    """Every load, schema, semantic, agent and pipeline-side pack code has an example here."""
    from converge_dsl import codes

    corpus = sorted((DATA / "dataflow").glob("*.expected"))  # the data-flow mistakes
    outputs = "".join(p.with_suffix(".expected").read_text("utf-8") for p in INVALID + corpus)
    elsewhere = {
        codes.TOO_LARGE: "tests/frontend/test_loader.py",
        codes.UNREADABLE: "tests/frontend/test_loader.py",
        # validate reads packs from the cache only, so a digest mismatch at the
        # repository (pack_not_installable.yaml) is found by `pack fetch` and `run`;
        # validate reports CD502 for an unusable cached pack (tests/packs/test_fetch.py).
        codes.PACK_NOT_INSTALLABLE: "tests/packs/test_fetch.py",
        # a FIFO or a hard link cannot be kept in the repository
        codes.REFERENCE_NOT_REGULAR: "tests/test_files.py",
        # found in test files by `converge-dsl test`, compared with tests/pipetest/data/
        codes.TEST_FILE_MISSING: "tests/pipetest/test_cli_test.py",
        codes.TEST_UNKNOWN_NAME: "tests/pipetest/test_cli_test.py",
        codes.TEST_BAD_REGEX: "tests/pipetest/test_cli_test.py",
        codes.TEST_DUPLICATE_CASE: "tests/pipetest/test_cli_test.py",
        codes.TEST_BAD_MODEL: "tests/pipetest/test_cli_test.py",
        # needs an installed distribution whose entry point fails (installed by that test)
        codes.KIND_NOT_LOADED: "tests/e2e/test_kind_distribution.py",
        # found at run time, when a locked server starts with another tool list
        codes.TOOL_LIST_CHANGED: "tests/tools/test_locked.py",
        # `serve --mcp`: a start refused, a tool call refused (not validate's)
        codes.SERVE_MCP_TOOL_NAME_TAKEN: "tests/serve/test_mcp.py",
        codes.SERVE_MCP_UNKNOWN_TOOL: "tests/serve/test_mcp.py",
        codes.SERVE_MCP_NOT_INSTALLED: "tests/serve/test_mcp.py",
        codes.SERVE_MCP_BAD_IDEMPOTENCY_KEY: "tests/serve/test_mcp.py",
        codes.SERVE_MCP_BAD_ARGUMENTS: "tests/serve/test_mcp_runs.py",
        codes.SERVE_MCP_HOST_REFUSED: "tests/serve/test_mcp_messages.py",
        codes.SERVE_MCP_PROTOCOL_VERSION: "tests/serve/test_mcp_messages.py",
        codes.SERVE_INTERNAL_ERROR: "tests/serve/test_bodies.py",
        # found when a pack is loaded (publish, fetch, lock): a pack that leaves its
        # folder cannot be published into the examples' repository
        codes.PACK_TOOL_OUTSIDE: "tests/packs/test_pack_tools.py",
        # found at run time, by `run --offline`
        codes.TOOL_OFFLINE_UNLOCKED: "tests/tools/test_caching.py",
        # `run` given another kind of file (an evaluation...): not validate's
        codes.NOT_A_PIPELINE: "tests/cli/test_run_other_kinds.py",
        # `serve --executor`: an option refused, a run whose worker died too often
        codes.EXECUTOR_OPTION_ALONE: "tests/serve/test_executors.py",
        codes.EXECUTOR_WORKER_LOST: "tests/serve/test_executors.py",
        # a served request's body or parameters refused (not validate's)
        codes.SERVE_UNSUPPORTED_MEDIA: "tests/serve/test_bodies.py",
        codes.SERVE_BODY_TIMEOUT: "tests/serve/test_bodies.py",
        codes.SERVE_BAD_PARAMETER: "tests/serve/test_app.py",
        # a served request's head refused before the application reads it
        codes.SERVE_BAD_HTTP: "tests/serve/test_heads.py",
        codes.SERVE_HEAD_TOO_LARGE: "tests/serve/test_heads.py",
        codes.SERVE_HEAD_TIMEOUT: "tests/serve/test_heads.py",
        codes.SERVE_BUSY: "tests/serve/test_heads.py",
        codes.SERVE_UVICORN_UNSUPPORTED: "tests/serve/test_heads.py",
        codes.SERVE_MCP_NOT_ACCEPTABLE: "tests/serve/test_mcp_messages.py",
        # a served request while the service's token file is gone bad (not validate's)
        codes.SERVE_TOKENS_UNUSABLE: "tests/serve/test_tokens.py",
        codes.SERVE_EVENT_NOT_GIVEN: "tests/serve/test_app.py",
        codes.SERVE_MCP_STOPPING: "tests/serve/test_mcp.py",
        # a pack archive refused as it is unpacked (lock, pack fetch, pack info, run)
        codes.PACK_ARCHIVE_REFUSED: "tests/packs/test_archive.py",
        # `run --cases --out R --resume` with R of another pipeline (not validate's)
        codes.RESULTS_OF_ANOTHER_PIPELINE: "tests/batch/test_resume.py",
        # refusals of the pack commands (lock, pack ...), not validate's
        codes.PACK_FILE_NOT_WRITTEN: "tests/packs/test_codes.py",
        codes.LOCK_FILE_BUSY: "tests/packs/test_codes.py",
        codes.REPOSITORY_UNREADABLE: "tests/packs/test_codes.py",
        codes.REPOSITORY_NOT_FOUND: "tests/packs/test_add_repo.py",
        codes.PIPELINE_PACKS_MALFORMED: "tests/packs/test_add_repo.py",
        codes.REPOSITORY_UNREACHABLE: "tests/packs/test_info.py",
        codes.SOLVER_NOT_LOADED: "tests/packs/test_codes.py",
        codes.PACK_RESOLUTION_GAVE_UP: "tests/packs/test_codes.py",
        codes.SIGNING_KEY_MALFORMED: "tests/packs/test_codes.py",
        codes.PUBLISH_VERSION_EXISTS: "tests/packs/test_codes.py",
        codes.PACK_FILE_NOT_FOUND: "tests/packs/test_codes.py",
        # an evaluation file's dataset with no case (validate checks eval files too)
        codes.EVAL_NO_CASES: "tests/pipetest/test_eval_spec.py",
        # a file of another kind given to `eval` (validate reads it as that kind)
        codes.EVAL_NOT_EVALUATION: "tests/pipetest/test_eval_spec.py",
        # refusals of the command line and the Python API, not validate's
        codes.ARGUMENTS_REFUSED: "tests/cli/test_refusal_codes.py",
        codes.PATH_NOT_FOUND: "tests/cli/test_refusal_codes.py",
        codes.FILE_UNREADABLE: "tests/cli/test_refusal_codes.py",
        codes.OUTPUT_REFUSED: "tests/cli/test_refusal_codes.py",
        codes.FOLDER_IN_USE: "tests/cli/test_refusal_codes.py",
        codes.INPUT_REFUSED: "tests/cli/test_refusal_codes.py",
        codes.API_MISUSE: "tests/cli/test_refusal_codes.py",
        codes.PART_NOT_INSTALLED: "tests/cli/test_refusal_codes.py",
        codes.ENVIRONMENT_FAILED: "tests/cli/test_refusal_codes.py",
    }
    reported = [
        v
        for k, v in vars(codes).items()
        if k.isupper() and ("CD000" <= v < "CD550") and v not in elsewhere
    ]
    assert len(reported) >= 50
    for code in reported:
        assert f"[{code}]" in outputs, code
    assert "[CD250]" in outputs
