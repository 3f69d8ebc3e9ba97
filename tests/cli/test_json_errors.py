"""Every command that takes `--format json` says its failure as JSON on standard output:
one `{"error": {"code", "message", "hint"}}` object (`cli._render.render_error`), its
line on standard error and its own exit code; `run` its run-result document.

`cache show --format json` (and every command but `run`, `lock` and `pack`) wrote
nothing on standard output when it failed.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = str(ROOT / "pipelines" / "market-entry.yaml")

# (the command line, without --format json; its exit code; its error's code)
FAILURES = [
    (["validate", "missing.yaml"], 3, "CD334"),
    (["plan", PIPELINE, "--input", "bad"], 3, "CD338"),
    (["graph", PIPELINE, "--input", "bad"], 3, "CD338"),
    (["run", PIPELINE, "--cases", "cases.jsonl"], 3, "CD333"),  # a batch without --out
    (["eval", "missing.eval.yaml"], 3, "CD334"),
    (["test", "missing.test.yaml"], 3, "CD334"),
    (["diff", "a.json", "b.json"], 3, "CD334"),
    (["explain", "CD0000"], 3, "CD333"),
    (["trace", "expand", "missing.jsonl", "1"], 3, "CD334"),
    (["lock", "missing.yaml"], 3, "CD334"),
    (["cache", "stats", "--cache-dir", "afile"], 3, "CD975"),
    (["cache", "ls", "--cache-dir", "afile"], 3, "CD975"),
    (["cache", "show", "nope"], 3, "CD977"),
    (["cache", "show", "nope", "--cache-dir", "afile"], 3, "CD975"),
    (["cache", "prune", "--max-bytes", "-1"], 3, "CD333"),
    (["cache", "clear", "--cache-dir", "afile"], 3, "CD975"),
    (["pack", "publish", "missing", "--repo", "repo"], 1, "CD332"),
    (["pack", "list", "missing"], 1, "CD325"),
    (["pack", "info", "nope"], 1, "CD574"),
    (["pack", "fetch", "missing.yaml"], 3, "CD334"),
    (["pack", "verify", "missing.yaml"], 3, "CD334"),
    (["pack", "add", "x", "missing.yaml"], 3, "CD334"),
    (["pack", "yank", "x", "1.0.0", "--repo", "missing"], 1, "CD325"),
    (["pack", "keygen", "afile"], 3, "CD336"),
]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a folder\n")
    return tmp_path


def _cli(folder: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    environ = {"XDG_CACHE_HOME": str(folder / "cache"), "HOME": str(folder)}
    code = run(list(argv), out, err, environ)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "exit_code", "code"), FAILURES, ids=[" ".join(f[0][:2]) for f in FAILURES]
)
def test_a_failure_under_format_json_is_one_json_error_object(
    folder: Path, argv: list[str], exit_code: int, code: str | None
) -> None:
    status, out, err = _cli(folder, *argv, "--format", "json")
    assert status == exit_code, err
    error = json.loads(out)["error"]
    assert set(error) == {"code", "message", "hint"}
    assert error["code"] == code
    head = f"error[{code}]" if code else "error"
    assert err.splitlines()[0] == f"{head}: {error['message']}"
    if error["hint"] is not None:
        assert f"  hint: {error['hint']}" in err.splitlines()
    # without --format json: the same line, nothing on standard output
    assert _cli(folder, *argv) == (exit_code, "", err)


def test_run_says_its_failure_in_its_run_result_document(folder: Path) -> None:
    status, out, err = _cli(folder, "run", PIPELINE, "--input", "bad", "--format", "json")
    assert status == 3
    document = json.loads(out)  # one document, no error object after it
    assert document["stop_reason"] == "usage_error"
    assert document["diagnostics"][0]["message"] in err


def test_an_invalid_pipeline_under_format_json_is_validate_s_json(folder: Path) -> None:
    (folder / "bad.yaml").write_text("version: 1\nname: x\nnope: 1\n")
    expected = _cli(folder, "validate", "bad.yaml", "--format", "json")
    assert expected[0] == 2
    for argv in (["plan", "bad.yaml"], ["graph", "bad.yaml"], ["lock", "bad.yaml"]):
        assert _cli(folder, *argv, "--format", "json")[:2] == expected[:2]


def test_standard_output_failing_under_the_error_object_keeps_the_error(folder: Path) -> None:
    """The object cannot be written (a full disk, a closed pipe): the error is still said on
    standard error with its own exit code; it was replaced by the write's failure (exit 1)."""

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    err = io.StringIO()
    status = run(["explain", "CD99999", "--format", "json"], Full(), err, {})
    assert status == 3
    assert err.getvalue().startswith("error[CD333]: unknown diagnostic code 'CD99999'")


def test_an_error_object_naming_an_undecodable_file_is_ascii_json(folder: Path) -> None:
    """A file name's undecodable byte (a lone surrogate in Python) is escaped in the object:
    it was written raw, so the output was not UTF-8 (or not written at all)."""
    status, out, _ = _cli(folder, "diff", "\udcff.json", "b.json", "--format", "json")
    assert status == 3
    assert out.isascii()
    assert repr("\udcff.json") in json.loads(out)["error"]["message"]  # named, escaped


# (the command line argparse refuses; whether it asked for JSON)
REFUSED_ARGUMENTS = [
    (["validate", PIPELINE, "--format", "json", "--bogus"], True),
    (["validate", PIPELINE, "--format=json", "--bogus"], True),
    (["validate", PIPELINE, "--bogus", "--format", "json"], True),
    (["validate", PIPELINE, "--form", "json", "--bogus"], True),  # argparse's abbreviation
    (["validate", PIPELINE, "--format", "json", "-q", "-v"], True),
    (["cache", "show", "x", "--format", "json", "--bogus"], True),  # a sub-command's --format
    (["run", PIPELINE, "--cases", "c.jsonl", "--format", "json", "--bogus"], True),  # a batch
    (["validate", PIPELINE, "--format", "xml"], False),  # the bad --format itself
    (["validate", PIPELINE, "--format", "json", "--format", "xml"], False),  # the last wins
    (["validate", PIPELINE, "--bogus", "--", "--format", "json"], False),  # not an option
    (["validate", PIPELINE, "--format"], False),
    (["init", "--format", "json"], False),  # a command without --format
]


@pytest.mark.parametrize(
    ("argv", "asked"), REFUSED_ARGUMENTS, ids=[" ".join(r[0][2:]) for r in REFUSED_ARGUMENTS]
)
def test_argparse_s_refusal_under_format_json_is_one_json_error_object(
    folder: Path, argv: list[str], asked: bool
) -> None:
    """argparse's own refusals (an unknown option, a bad value) said the error only as text
    on standard error, whatever --format was asked."""
    status, out, err = _cli(folder, *argv)
    assert status == 3
    assert err.startswith("error[CD333]: ")
    if not asked:
        assert out == ""
        return
    error = json.loads(out)["error"]
    assert error["code"] == "CD333"
    assert err.splitlines()[0] == f"error[CD333]: {error['message']}"


@pytest.mark.parametrize(
    "argv",
    [
        ["run", PIPELINE, "--format", "json", "--bogus"],
        ["run", PIPELINE, "--format", "json", "--concurrency", "many"],
        ["run", "--format", "json"],
        ["run", "--format", "json", PIPELINE, "--concurrency", "x"],
        ["run", "--format", "json", "--concurrency", "x", "--", PIPELINE],
    ],
    ids=["unknown option", "bad value", "no pipeline", "after an option", "after --"],
)
def test_run_says_argparse_s_refusal_in_its_run_result_document(
    folder: Path, argv: list[str]
) -> None:
    """`run --format json` always prints one run-result document; argparse's refusals
    printed `{"error": {...}}` instead."""
    status, out, err = _cli(folder, *argv)
    assert status == 3
    assert err.startswith("error[CD333]: ")
    document = json.loads(out)
    assert document["stop_reason"] == "usage_error"
    assert [d["code"] for d in document["diagnostics"]] == ["CD333"]
    assert err.splitlines()[0] == f"error[CD333]: {document['diagnostics'][0]['message']}"
    # The file is named, never an option's value (it named 'json' of --format json).
    assert document["diagnostics"][0]["file"] == (PIPELINE if PIPELINE in argv else "")
