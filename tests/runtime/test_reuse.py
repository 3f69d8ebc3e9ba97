"""Compile once, run many: the runs of one loaded pipeline share its settings and compile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import converge_dsl
from converge_dsl.engine.policy import PromotionPolicy, gate_of
from converge_dsl.models import ScriptedModel
from converge_dsl.runtime import _assembly, _reuse

ROOT = Path(__file__).resolve().parents[2]
ECHO_PATH = ROOT / "tests" / "batch" / "data" / "echo.yaml"
RULES = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: rules
inputs: {word: {default: tea}}
keys: [{name: out}]
seeds: [{id: s, content: go}]
suggestors:
  - name: r
    kind: rule
    dependencies: [seeds]
    emit: [{key: out, id: o, content: "got {{ inputs.word }}"}]
"""


def _counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[object]:
    calls: list[object] = []
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_pipeline_without_models_compiles_once_per_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(RULES, encoding="utf-8")
    compiles = _counting(monkeypatch, _assembly, "compile_pipeline")
    settings = _counting(monkeypatch, _reuse, "compile_settings")
    pipeline = converge_dsl.load(path)
    runs = [pipeline.run(), pipeline.run(), pipeline.run({"word": "milk"}), pipeline.run()]
    assert [r.facts["out"][0].content for r in runs] == [
        "got tea",
        "got tea",
        "got milk",
        "got tea",
    ]
    assert len(compiles) == 2  # one per distinct inputs
    assert len(settings) == 2
    # Each run has its own engine: a later run starts from the seeds again.
    assert [r.cycles for r in runs] == [runs[0].cycles] * 4


def test_a_pipeline_with_models_compiles_once_and_each_run_has_its_own_model_and_meter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.batch.conftest import ECHO

    compiles = _counting(monkeypatch, _assembly, "compile_pipeline")
    settings = _counting(monkeypatch, _reuse, "compile_settings")
    pipeline = converge_dsl.load(ECHO)
    first, second = pipeline.run({"word": "tea"}), pipeline.run({"word": "tea"})
    assert first.facts == second.facts
    assert first.usage.model_calls == second.usage.model_calls == 1  # a meter per run
    other = ScriptedModel.from_text(OTHER_SCRIPT, "other.script.yaml")
    third = pipeline.run({"word": "tea"}, models={"default": other})
    assert third.facts["hypotheses"][0].content == "said something else"  # this run's model
    assert pipeline.run({"word": "tea"}).facts == first.facts
    assert len(compiles) == 1
    assert len(settings) == 1


OTHER_SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {reply: "said something else"}
"""


def test_a_pipeline_whose_suggestor_may_hold_its_run_compiles_per_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from converge_dsl.compiler import _llm

    # A suggestor without `for_run` may keep the run's model or meter it was compiled with.
    monkeypatch.delattr(_llm.LlmSuggestor, "for_run")
    _reuse._for_runs.cache_clear()
    compiles = _counting(monkeypatch, _assembly, "compile_pipeline")
    try:
        pipeline = converge_dsl.load(ECHO_PATH)
        first, second = pipeline.run({"word": "tea"}), pipeline.run({"word": "tea"})
    finally:
        _reuse._for_runs.cache_clear()
    assert first.facts == second.facts
    assert len(compiles) == 2


def test_an_agent_pipeline_compiles_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = _counting(monkeypatch, _assembly, "compile_pipeline")
    pipeline = converge_dsl.load(ROOT / "pipelines" / "agent-review.yaml")
    first, second = pipeline.run(), pipeline.run()
    assert first.facts == second.facts
    assert len(compiles) == 2  # an agent keeps per-run state


def test_inputs_that_are_not_json_are_never_kept() -> None:
    assert _reuse._key({"when": object()}) is None
    assert _reuse._key({"b": 1, "a": [1]}) == _reuse._key({"a": [1], "b": 1})


def test_a_policy_compiles_its_gate_once() -> None:
    policy = PromotionPolicy(key_schemas={"out": {"type": "object"}})
    assert gate_of(policy) is gate_of(policy)
    assert gate_of(PromotionPolicy()) is not gate_of(policy)
