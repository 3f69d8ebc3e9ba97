"""`run` given another kind of converge-dsl file: which it is and the command that takes it."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from converge_dsl.cli import run as cli

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected"


# A file of each other kind of ours, and what the refusal's hint says takes it.
OTHER_KINDS = [
    ("pipelines/agent-review.test.yaml", "run it with `converge-dsl test "),
    ("pipelines/agent-review.script.yaml", "a pipeline's model answers from it"),
    ("builtin_packs/optimization/pack.yaml", "a pipeline uses its pack under `packs:`"),
    ("tests/frontend/data/dir-is-a-file.run.yaml", "give it to a run of a pipeline: `converge"),
]


def _expect(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("UPDATE_EXPECTED"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def _run(*args: str) -> tuple[int, str, str]:
    return _run_command("run", *args)


def _run_command(command: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        code = cli([command, *args], out, err)
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


def test_an_evaluation_file_given_to_run_says_to_run_it_with_eval() -> None:
    # It was read as a pipeline: eight schema errors (CD101 'name', CD103 'kind', CD100
    # for each key of an evaluation), exit 2.
    code, out, err = _run("pipelines/support-triage/triage.eval.yaml")
    assert (code, out) == (3, "")
    _expect("run-evaluation-file.txt", err)


@pytest.mark.parametrize(
    ("path", "said"),
    OTHER_KINDS,
)
def test_every_other_kind_given_to_run_is_one_usage_error_at_its_kind(
    path: str, said: str, tmp_path: Path
) -> None:
    cases, out = tmp_path / "cases.jsonl", str(tmp_path / "out.jsonl")
    cases.write_text('{"inputs": {}}\n', encoding="utf-8")
    for args in ((path,), (path, "--cases", str(cases), "--out", out)):
        code, _, err = _run(*args)
        assert code == 3, err
        assert err.startswith("error[CD818]: this is a")
        assert f"= hint: {said}" in err
        assert err.count("error[") == 1


def test_run_format_json_gives_the_refusal_located_at_the_kind() -> None:
    code, out, _ = _run("pipelines/support-triage/triage.eval.yaml", "--format", "json")
    assert code == 3
    assert json.loads(out)["stop_reason"] == "usage_error"  # exit 3, as stop-reasons.md says
    (found,) = json.loads(out)["diagnostics"]
    assert (found["code"], found["line"], found["column"], found["path"]) == ("CD818", 4, 7, "kind")


def test_a_pipeline_naming_such_a_kind_deeper_down_still_runs(tmp_path: Path) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: p\n"
        "description: 'kind: Evaluation'\nseeds:\n  - {key: hypotheses, id: a, content: x}\n",
        encoding="utf-8",
    )
    code, _, err = _run(str(pipeline))
    assert code == 0, err


def test_another_tools_file_saying_one_of_our_kinds_is_not_claimed(tmp_path: Path) -> None:
    # Tekton's `kind: PipelineTest` was refused as "a pipeline test file" of ours.
    other = tmp_path / "t.yaml"
    other.write_text("apiVersion: tekton.dev/v1\nkind: PipelineTest\nspec: {}\n", encoding="utf-8")
    code, _, err = _run(str(other))
    assert code == 2, err
    assert "CD818" not in err


def test_a_pipeline_given_to_eval_is_the_same_usage_error(tmp_path: Path) -> None:
    # `eval` said CD341 with exit 2, `run` CD818 with exit 3, for the same mistake.
    code, out, err = _run_command("eval", "pipelines/support-triage/ticket.yaml")
    assert code == 3, out + err
    assert (out + err).startswith("error[CD341]: this is a pipeline (kind: Pipeline), not an ")


def test_a_pipeline_with_a_wrong_kind_gets_all_its_errors(tmp_path: Path) -> None:
    # A pipeline saying `kind: Evaluation` was one CD818 ("run it with eval"), which
    # hid its other mistakes; `eval` then gave ten schema errors.
    text = (ROOT / "pipelines/support-triage/ticket.yaml").read_text(encoding="utf-8")
    assert "\nkind: Pipeline\n" in text
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        text.replace("\nkind: Pipeline\n", "\nkind: Evaluation\nmax_cycels: 3\n"),
        encoding="utf-8",
    )
    for command in ("run", "plan", "graph"):
        code, _, err = _run_command(command, str(pipeline))
        assert code == 2, err
        assert "CD818" not in err
        assert "error[CD103]" in err
        assert "max_cycels" in err


def test_an_evaluation_with_a_wrong_kind_gets_its_schemas_errors(tmp_path: Path) -> None:
    text = (ROOT / "pipelines/support-triage/triage.eval.yaml").read_text(encoding="utf-8")
    assert "\nkind: Evaluation\n" in text
    evaluation = tmp_path / "e.eval.yaml"
    evaluation.write_text(text.replace("\nkind: Evaluation\n", "\nkind: Pipeline\n"), "utf-8")
    code, out, err = _run_command("eval", str(evaluation))
    assert code == 2, out + err
    assert "CD341" not in out + err
    assert "CD103" in out + err


@pytest.mark.parametrize(
    ("path", "said"),
    OTHER_KINDS,
)
def test_lock_given_another_kind_says_what_it_is_and_what_takes_it(path: str, said: str) -> None:
    # `lock` read it as a pipeline: CD101 'name', CD103 'kind' and CD100 for each of
    # its keys, exit 2.
    code, _, err = _run_command("lock", path)
    assert code == 3, err
    assert err.startswith("error[CD818]: this is a")
    assert f"= hint: {said}" in err
    assert err.count("error[") == 1


def test_lock_given_an_evaluation_says_what_run_says() -> None:
    code, out, err = _run_command("lock", "pipelines/support-triage/triage.eval.yaml")
    assert (code, out) == (3, "")
    _expect("run-evaluation-file.txt", err)
