"""A case's models: a cassette replayed, a replacement the pipeline does not declare."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from converge_dsl.batch import load
from converge_dsl.errors import UsageError
from converge_dsl.models import ScriptedModel

from .conftest import ROOT, cli


def _triage(folder: Path) -> Path:
    for name in ("incident-triage.yaml", "incident-triage.script.yaml"):
        shutil.copy(ROOT / "pipelines" / name, folder / name)
    return folder / "incident-triage.yaml"


def test_a_cassette_replays_in_place_of_the_script(tmp_path: Path) -> None:
    pipeline = _triage(tmp_path)
    assert cli("run", pipeline, "--record", tmp_path / "rec.jsonl")[0] == 0
    (tmp_path / "rec.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: incident-triage.yaml\n"
        "models: {analyst: {cassette: rec.jsonl}}\n"
        "cases: [{name: replayed, expect: {stop_reason: converged, counts: {hypotheses: 2}}}]\n"
    )
    code, out, _ = cli("test", tmp_path / "rec.test.yaml")
    assert code == 0, out


def test_the_api_replaces_models_by_name(tmp_path: Path) -> None:
    pipeline = load(_triage(tmp_path))
    reply = ScriptedModel.from_text(
        'apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {reply: "[]"}\n',
        "empty.script.yaml",
        name="analyst",
    )
    result = pipeline.run(models={"analyst": reply})
    assert "hypotheses" not in result.facts
    with pytest.raises(UsageError, match="declares no model 'analsyt'") as info:
        pipeline.run(models={"analsyt": reply})
    assert info.value.hint == "did you mean 'analyst'?"
    assert (pipeline.models, pipeline.invariants) == (("analyst",), ("constrained",))
    assert "hypotheses" in pipeline.keys


def test_schema_command_prints_the_test_schema() -> None:
    code, out, _ = cli("schema", "pipeline-test")
    assert code == 0
    assert '"const": "PipelineTest"' in out


def test_an_invalid_model_script_is_reported_before_any_case_runs(tmp_path: Path) -> None:
    _triage(tmp_path)
    (tmp_path / "bad.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        'rules:\n  - match: {sugestor: x}\n    reply: "ok"\n'
    )
    (tmp_path / "s.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: incident-triage.yaml\n"
        "models: {analyst: {script: bad.script.yaml}}\ncases: [{name: x, expect: {}}]\n"
    )
    code, out, err = cli("test", tmp_path / "s.test.yaml")
    assert (code, out) == (2, "")
    assert "error[CD100]: unknown key 'sugestor' in rules[0].match" in err
    assert "bad.script.yaml:4:13" in err


def test_each_pipeline_is_loaded_once_per_test_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import converge_dsl.batch

    _triage(tmp_path)
    loads: list[Path] = []

    def counting_load(path: Path, **options: object) -> object:
        loads.append(Path(path))
        return load(path, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(converge_dsl.batch, "load", counting_load)
    (tmp_path / "t.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: incident-triage.yaml\n"
        "cases:\n  - {name: a, expect: {stop_reason: converged}}\n"
        "  - {name: b, inputs: {service: search}, expect: {stop_reason: converged}}\n"
        "  - {name: c, pipeline: ./incident-triage.yaml, expect: {stop_reason: converged}}\n"
    )
    code, out, _ = cli("test", tmp_path / "t.test.yaml")
    assert code == 0, out
    assert len(loads) == 1


def test_an_inline_off_schema_reply_tests_a_non_conforming_answer_offline(tmp_path: Path) -> None:
    _triage(tmp_path)
    (tmp_path / "off.test.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: PipelineTest\npipeline: incident-triage.yaml\n"
        "cases:\n  - name: prose instead of JSON\n"
        "    models: {analyst: {rules: [{match: {suggestor: hypothesise},\n"
        "      reply: 'I think it was the deploy.', off_schema: true}]}}\n"
        "    expect:\n      facts:\n"
        "        - {key: diagnostic, id: 'llm:invalid-output:hypothesise:2', contains: not JSON}\n"
        "      absent: [{key: hypotheses}]\n"
    )
    code, out, _ = cli("test", tmp_path / "off.test.yaml")
    assert code == 0, out
