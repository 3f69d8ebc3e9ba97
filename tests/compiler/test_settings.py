"""compile_settings: the cheap first step; compile_pipeline from settings with injected builders."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.compiler import (
    CompileContext,
    InvariantCheck,
    compile_pipeline,
    compile_settings,
    declare_models,
)
from converge_dsl.engine import Budget, Invariant, PromotionPolicy, Provenance, Suggestor
from converge_dsl.engine.budget import UsageMeter
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend import KINDS, KindRegistry, SuggestorSpec, load_text

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
keys: [{name: risks}]
inputs: {topic: {default: tea}}
models:
  main: {adapter: scripted, script: main.script.yaml}
  old: {adapter: replay, cassette: ../tapes/old.jsonl}
budget: {max_wall_s: 5, max_cycles: 9}
promotion: {forbidden_terms: [secret]}
seeds:
  - {id: s1, content: hello}
  - {id: r1, key: risks, content: {level: 2}, confidence: 0.5}
invariants:
  - {name: has-seeds, class: acceptance, check: "count('seeds') >= 1", critical: false}
"""


def _document(body: str = PIPELINE, file: str = "/work/p/p.yaml") -> Any:
    return load_text(textwrap.dedent(body), file)


def test_settings_are_typed_and_need_no_suggestor() -> None:
    settings = compile_settings(_document(), inputs={})
    assert settings.name == "t"
    assert settings.base_dir == Path("/work/p")
    assert settings.budget == Budget(max_cycles=9, max_wall_s=5)
    assert settings.promotion == PromotionPolicy(forbidden_terms=("secret",))
    assert settings.on_error == "stop"
    assert dict(settings.inputs) == {"topic": "tea"}
    assert settings.declared_keys[-1] == "risks"
    assert [(s.key, s.id, s.confidence) for s in settings.seeds] == [
        ("seeds", "s1", 1.0),
        ("risks", "r1", 0.5),
    ]
    assert {s.provenance for s in settings.seeds} == {Provenance("seeds@t")}


def test_model_declarations_name_the_files_each_model_reads() -> None:
    models = compile_settings(_document(), inputs={}).models
    assert list(models) == ["main", "old"]
    main, old = models["main"], models["old"]
    assert (main.spec.adapter, main.spec.files, main.spec.record) == (
        "scripted",
        {"script": "main.script.yaml"},
        None,
    )
    assert main.spec.path == ("models", "main")
    assert dict(main.files) == {"script": Path("/work/p/main.script.yaml")}
    assert dict(old.files) == {"cassette": Path("/work/p/../tapes/old.jsonl")}
    assert main.base_dir == Path("/work/p")
    assert dict(declare_models(_document())) == dict(models)


def test_unknown_input_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown input 'nope'"):
        compile_settings(_document(), inputs={"nope": 1})


def test_compile_from_settings_carries_them() -> None:
    settings = compile_settings(_document(), inputs={"topic": "tea"})
    compiled = compile_pipeline(settings, models={}, usage=UsageMeter(settings.budget))
    assert compiled.settings is settings
    assert (compiled.name, compiled.budget, compiled.seeds) == (
        "t",
        settings.budget,
        settings.seeds,
    )
    (invariant,) = compiled.invariants
    assert isinstance(invariant, Invariant)
    assert isinstance(invariant.check, InvariantCheck)
    assert (invariant.invariant_class, invariant.critical) == ("acceptance", False)
    with pytest.raises(TypeError):
        compile_pipeline(settings, inputs={}, models={}, usage=UsageMeter(settings.budget))


AGENT = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: t
suggestors:
  - {name: a, kind: agent, model: main, target: evaluations, goal: Go.}
"""


def test_kinds_above_the_compiler_are_injected_not_imported() -> None:
    settings = compile_settings(_document(AGENT), inputs={})
    meter = UsageMeter(settings.budget)
    assert KINDS.names == ("seed", "rule", "llm", "tool")
    with pytest.raises(PipelineInvalid) as caught:
        compile_pipeline(settings, models={}, usage=meter)
    assert caught.value.diagnostics[0].code == codes.COMPILE_KIND_UNAVAILABLE

    seen: list[KindRegistry] = []

    def build_agent(spec: SuggestorSpec, ctx: CompileContext) -> Suggestor:
        seen.append(ctx.kinds)
        seed = ctx.kinds.kind("seed")
        raw = {"name": spec.name, "kind": "seed", "facts": []}
        built: Suggestor = seed.builder()(seed.parse(spec.path, raw), ctx)
        return built

    agent = KINDS.kind("seed")._replace(name="agent", build=build_agent)
    kinds = KINDS.with_kinds({"agent": agent})
    compiled = compile_pipeline(settings, models={}, usage=meter, kinds=kinds)
    assert [s.name for s in compiled.suggestors] == ["a"]
    assert seen[0] is kinds  # a builder sees the registry (a pack builds other kinds)
    assert compiled.kind_of("a") is agent


def test_settings_read_the_manifest_they_are_given() -> None:
    from converge_dsl.frontend import build_manifest

    manifest = build_manifest(_document())
    settings = compile_settings(manifest, inputs={})
    assert settings.manifest is manifest
    assert settings.document is manifest.document
    assert settings == compile_settings(manifest.document, inputs={})


def test_what_the_pipeline_does_not_write_takes_the_engines_defaults() -> None:
    from converge_dsl.compiler._settings import budget_of, promotion_of
    from converge_dsl.frontend import BudgetSpec, PromotionSpec

    assert budget_of(BudgetSpec()) == Budget()
    assert budget_of(BudgetSpec(max_tokens=7)) == Budget(max_tokens=7)
    assert promotion_of(PromotionSpec(), {}) == PromotionPolicy()
    written = PromotionSpec(require_provenance=False, gated_keys=("risks",))
    assert promotion_of(written, {"risks": {"type": "object"}}) == PromotionPolicy(
        require_provenance=False, gated_keys=("risks",), key_schemas={"risks": {"type": "object"}}
    )
