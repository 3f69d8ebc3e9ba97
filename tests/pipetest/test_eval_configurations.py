"""Comparing model configurations, the latency bound, the evaluation's budgets and executors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from converge_dsl import codes
from converge_dsl.errors import PipelineInvalid
from converge_dsl.pipetest import read_eval_file

from .conftest import DATA, cli

EVAL = DATA / "eval"

_COMPARED = """\
apiVersion: converge-dsl/v1
kind: Evaluation
pipeline: classify.yaml
dataset: tickets.jsonl
threshold: 0.5
configurations:
  - name: shipped
  - name: all-bugs
    description: a model that calls every ticket a bug
    models:
      default: {adapter: scripted, script: bugs.script.yaml}
metrics:
  - name: category
    exact: {key: labels, field: /category, expected: category}
    threshold: 0.9
  - name: converged
    stop_reason: {equals: converged}
"""
_BUGS = """\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {reply: '[{"category": "bug"}]'}
"""


def _folder(tmp_path: Path, text: str = _COMPARED) -> Path:
    for name in ("classify.yaml", "classify.script.yaml", "tickets.jsonl"):
        shutil.copy(EVAL / name, tmp_path / name)
    (tmp_path / "bugs.script.yaml").write_text(_BUGS, encoding="utf-8")
    path = tmp_path / "compared.eval.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_each_configuration_runs_the_dataset_and_is_shown_side_by_side(tmp_path: Path) -> None:
    code, out, err = cli("eval", _folder(tmp_path))
    assert code == 1, err  # the all-bugs configuration misses the category threshold
    assert "== configuration shipped\n" in out
    assert "== configuration all-bugs\n" in out
    table = out.split("side by side:\n", 1)[1].splitlines()
    assert table == [
        "  metric        shipped  all-bugs",
        "  category        1.000    0.300!",
        "  converged       1.000     1.000",
        "  overall         1.000    0.650!",
        "                 passed    FAILED",
    ]


def test_the_json_and_junit_outputs_hold_one_part_per_configuration(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    code, out, _ = cli("eval", path, "--format", "json")
    document = json.loads(out)
    assert document["passed"] is False
    parts = document["configurations"]
    assert [(p.get("configuration"), p["passed"]) for p in parts] == [
        ("shipped", True),
        ("all-bugs", False),
    ]
    code, out, _ = cli("eval", path, "--format", "junit")
    assert code == 1
    assert out.startswith("<testsuites>\n<testsuite ")
    assert 'compared.eval.yaml [shipped]" ' in out
    assert 'compared.eval.yaml [all-bugs]" ' in out
    assert out.count("<testsuite ") == 2
    assert out.count("<failure ") == 1


def test_a_baseline_of_several_configurations_is_compared_by_name(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    base = tmp_path / "base.json"
    cli("eval", path, "--format", "json", "-o", base)
    (tmp_path / "classify.yaml").write_text(
        (EVAL / "classify-v2.yaml").read_text(), encoding="utf-8"
    )
    code, out, _ = cli("eval", path, "--baseline", base)
    assert code == 1
    shipped = out.split("== configuration shipped\n", 1)[1].split("== configuration", 1)[0]
    assert "  regressed: double-charge / category: 1.000 -> 0.000" in shipped
    bugs = out.split("== configuration all-bugs\n", 1)[1].split("side by side", 1)[0]
    assert "against the baseline:\n  no change" in bugs


def test_a_configuration_naming_a_model_the_pipeline_lacks_is_located(tmp_path: Path) -> None:
    text = _COMPARED.replace("      default: {adapter", "      defualt: {adapter")
    text = text.replace("  - name: shipped\n", "  - name: shipped\n  - name: shipped\n")
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(_folder(tmp_path, text))
    found = {(d.code, d.message, d.hint, d.line) for d in caught.value.diagnostics}
    assert (
        codes.EVAL_UNKNOWN_MODEL,
        "pipeline 'classify' declares no model 'defualt'",
        "did you mean 'default'?",
        12,
    ) in found
    assert (
        codes.EVAL_BAD_CONFIGURATION,
        "two configurations are named 'shipped'",
        "the first is on line 7; give each configuration its own name",
        8,
    ) in found


def test_an_unknown_key_is_an_evaluation_error_with_a_guess(tmp_path: Path) -> None:
    text = _COMPARED.replace("{key: labels, field", "{key: label, field")
    with pytest.raises(PipelineInvalid) as caught:
        read_eval_file(_folder(tmp_path, text))
    (problem,) = caught.value.diagnostics
    assert problem.code == codes.EVAL_UNKNOWN_NAME
    assert problem.message == "pipeline 'classify' has no key 'label' for metric 'category'"
    assert problem.hint == "did you mean 'labels'?"


_LATENCY = """\
apiVersion: converge-dsl/v1
kind: Evaluation
pipeline: classify.yaml
dataset: tickets.jsonl
metrics:
  - name: fast
    latency: {{max_seconds: {bound}}}
    threshold: 1
  - name: calls
    usage: {{max_model_calls: {calls}}}
    threshold: 1
"""


def test_the_latency_and_call_bounds_score_each_case(tmp_path: Path) -> None:
    path = _folder(tmp_path, _LATENCY.format(bound=60, calls=1))
    code, out, _ = cli("eval", path, "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert all(0 < case["seconds"] < 60 for case in document["cases"])
    path.write_text(_LATENCY.format(bound="0.000001", calls=0))
    code, out, _ = cli("eval", path)
    assert code == 1
    assert "FAIL fast: 0.000" in out
    assert "FAIL calls: 0.000" in out


def test_no_case_starts_once_the_evaluations_cap_is_spent(tmp_path: Path) -> None:
    path = _folder(tmp_path, _LATENCY.format(bound=60, calls=1))
    code, out, _ = cli("eval", path, "--max-model-calls", "3", "--concurrency", "1")
    assert code == 1
    assert "not run: 7 case(s), the evaluation's caps were spent" in out
    assert ": 3 cases" in out.splitlines()[0]
    code, out, _ = cli(
        "eval", path, "--max-model-calls", "3", "--concurrency", "1", "--format", "json"
    )
    assert len(json.loads(out)["not_run"]) == 7


def test_a_case_budget_lowers_each_cases_budget(tmp_path: Path) -> None:
    path = _folder(tmp_path, _COMPARED)
    code, out, _ = cli("eval", path, "--case-max-tokens", "1", "--format", "json")
    assert code == 1
    for part in json.loads(out)["configurations"]:
        assert {c["stop_reason"] for c in part["cases"]} == {"token_budget_exhausted"}
    code, _, err = cli("eval", path, "--case-max-model-calls", "0")
    assert code == 3
    assert "--case-max-model-calls must be above 0" in err


def test_the_process_executor_gives_the_same_scores(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    local = cli("eval", path, "--format", "json", "--no-timings")[1]
    code, elsewhere, err = cli(
        "eval", path, "--format", "json", "--no-timings", "--executor", "process",
        "--concurrency", "2",
    )  # fmt: skip
    assert code == 1, err
    assert elsewhere == local


def test_the_evaluations_cap_holds_for_every_configuration_together(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    code, out, _ = cli(
        "eval", path, "--max-model-calls", "13", "--concurrency", "1", "--format", "json"
    )
    assert code == 1
    shipped, bugs = json.loads(out)["configurations"]
    assert (len(shipped["cases"]), "not_run" in shipped) == (10, False)
    assert (len(bugs["cases"]), len(bugs["not_run"])) == (3, 7)


def test_the_judges_of_every_configuration_record_into_one_cassette(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    (tmp_path / "judge.script.yaml").write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        'default: {reply: \'{"score": 1, "reason": "fine"}\'}\n'
    )
    text = path.read_text().replace(
        "metrics:\n",
        "judges:\n  grader: {adapter: scripted, script: judge.script.yaml}\nmetrics:\n"
        "  - name: judged\n    judge: {model: grader, rubric: '{{ run.facts.labels }}'}\n",
    )
    path.write_text(text)
    cassette = tmp_path / "recorded"
    recorded = cli("eval", path, "--record", cassette, "--format", "json", "--no-timings")[1]
    assert len((cassette / "judges.jsonl").read_text().splitlines()) == 20
    replayed = cli("eval", path, "--replay", cassette, "--format", "json", "--no-timings")[1]
    assert replayed == recorded
