"""build_manifest: every declared section read to its frozen record, with its path and span."""

from __future__ import annotations

import textwrap

import pytest

from converge_dsl.frontend import (
    AccountSpec,
    BudgetSpec,
    HttpModelSpec,
    InputSpec,
    InvariantSpec,
    KeySpec,
    LoadedDocument,
    PackRequirement,
    PipelineFacts,
    PipelineManifest,
    PromotionSpec,
    ReplayModelSpec,
    RepositorySpec,
    ScriptedModelSpec,
    build_manifest,
    load_text,
    model_spec,
    schema_diagnostics,
)

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: full
description: Every section.
keys:
  - {name: risks, description: What may go wrong, schema: {type: object}}
  - {name: notes}
inputs:
  topic: {description: The subject, default: tea}
  region: {required: true}
  nothing: {default: null}
packs: {optimization: ">=1.0,<2"}
repositories:
  - builtin
  - {path: ./repo, trusted_keys: [k1]}
  - {url: "https://packs.example.org", redirect_hosts: [cdn.example.org]}
models:
  main: {adapter: scripted, script: main.script.yaml, record: main.jsonl}
  old: {adapter: replay, cassette: old.jsonl}
  fast:
    adapter: openai
    base_url: "http://127.0.0.1:8080/v1"
    model: m
    accounts: [{name: a, api_key_env: A_API_KEY}, {name: b, api_key_env: B_API_KEY}]
    timeout_s: 30
    retries: 2
    stream: true
    max_connections: 4
    limits: {max_response_bytes: 2048}
  claude: {adapter: anthropic, base_url: "http://127.0.0.1:8080", model: c}
budget: {max_cycles: 9, max_wall_s: 5}
promotion: {min_confidence: 0.7, forbidden_terms: [secret], gated_keys: [risks]}
on_error: diagnose
seeds:
  - {id: s1, content: hello}
suggestors:
  - {name: r, kind: rule, emit: [{key: notes, id: note, content: x}]}
invariants:
  - {name: has-seeds, class: acceptance, check: "count('seeds') >= 1", critical: false}
  - {name: notes, class: semantic, check: "true", message: "no {{ cycle }}"}
"""


def _document(text: str = PIPELINE) -> LoadedDocument:
    document = load_text(textwrap.dedent(text), "p.yaml")
    assert schema_diagnostics(document, "pipeline.v1.json") == []
    return document


@pytest.fixture(name="manifest")
def _manifest() -> PipelineManifest:
    return build_manifest(_document())


def test_the_header(manifest: PipelineManifest) -> None:
    assert (manifest.name, manifest.api_version, manifest.description) == (
        "full",
        "converge-dsl/v1",
        "Every section.",
    )
    assert manifest.on_error == "diagnose"
    assert manifest.file == "p.yaml"


def test_keys_with_their_schemas(manifest: PipelineManifest) -> None:
    assert manifest.keys == (
        KeySpec("risks", "What may go wrong", {"type": "object"}, ("keys", 0)),
        KeySpec("notes", None, None, ("keys", 1)),
    )
    assert manifest.key_schemas() == {"risks": {"type": "object"}}


def test_inputs_tell_a_null_default_from_none(manifest: PipelineManifest) -> None:
    topic, region, nothing = manifest.inputs.values()
    assert topic == InputSpec(
        name="topic",
        description="The subject",
        required=False,
        has_default=True,
        default="tea",
        path=("inputs", "topic"),
    )
    assert (region.required, region.has_default) == (True, False)
    assert (nothing.has_default, nothing.default) == (True, None)


def test_models_are_one_record_per_adapter(manifest: PipelineManifest) -> None:
    main, old, fast, claude = manifest.models.values()
    assert main == ScriptedModelSpec("main", "main.script.yaml", "main.jsonl", ("models", "main"))
    assert main.files == {"script": "main.script.yaml"}
    assert old == ReplayModelSpec("old", "old.jsonl", ("models", "old"))
    assert (old.files, old.record) == ({"cassette": "old.jsonl"}, None)
    assert isinstance(fast, HttpModelSpec)
    assert (fast.adapter, fast.base_url, fast.model) == ("openai", "http://127.0.0.1:8080/v1", "m")
    assert fast.accounts == (
        AccountSpec("a", "A_API_KEY", ("models", "fast", "accounts", 0)),
        AccountSpec("b", "B_API_KEY", ("models", "fast", "accounts", 1)),
    )
    assert dict(fast.numbers) == {"timeout_s": 30, "retries": 2}
    assert (fast.stream, fast.max_connections, fast.structured_output) == (True, 4, None)
    assert fast.limits == {"max_response_bytes": 2048}
    assert fast.details == (("model", "m"), ("base_url", "http://127.0.0.1:8080/v1"))
    assert isinstance(claude, HttpModelSpec)
    assert (claude.adapter, claude.accounts, dict(claude.numbers)) == ("anthropic", None, {})


def test_budget_and_promotion_hold_only_what_is_written(manifest: PipelineManifest) -> None:
    assert manifest.budget == BudgetSpec(max_cycles=9, max_wall_s=5)
    assert manifest.promotion == PromotionSpec(
        min_confidence=0.7, forbidden_terms=("secret",), gated_keys=("risks",)
    )


def test_packs_and_repositories(manifest: PipelineManifest) -> None:
    assert manifest.packs == (
        PackRequirement("optimization", ">=1.0,<2", ("packs", "optimization")),
    )
    builtin, folder, remote = manifest.repositories
    assert builtin.builtin
    assert builtin.written == "builtin"
    assert folder == RepositorySpec(
        folder="./repo",
        url=None,
        trusted_keys=("k1",),
        redirect_hosts=(),
        written={"path": "./repo", "trusted_keys": ["k1"]},
        path=("repositories", 1),
    )
    assert not folder.builtin
    assert (remote.url, remote.redirect_hosts) == (
        "https://packs.example.org",
        ("cdn.example.org",),
    )


def test_invariants(manifest: PipelineManifest) -> None:
    assert manifest.invariants == (
        InvariantSpec(
            name="has-seeds",
            klass="acceptance",
            check="count('seeds') >= 1",
            critical=False,
            message=None,
            path=("invariants", 0),
        ),
        InvariantSpec(
            name="notes",
            klass="semantic",
            check="true",
            critical=None,
            message="no {{ cycle }}",
            path=("invariants", 1),
        ),
    )


def test_suggestors_stay_the_documents_own_and_seeds_are_typed(
    manifest: PipelineManifest,
) -> None:
    data = manifest.document.data
    assert manifest.suggestors is data["suggestors"]
    assert [(s.path, s.key, s.id, s.content) for s in manifest.seeds] == [
        (("seeds", i), s.get("key", "seeds"), s["id"], s["content"])
        for i, s in enumerate(data["seeds"])
    ]


def test_every_record_finds_its_span(manifest: PipelineManifest) -> None:
    fast = manifest.models["fast"]
    assert isinstance(fast, HttpModelSpec)
    assert fast.accounts is not None
    lines = [
        (manifest.keys[1], 7),
        (manifest.inputs["region"], 10),
        (manifest.models["old"], 19),
        (fast.accounts[1], 24),
        (manifest.packs[0], 12),
        (manifest.repositories[2], 16),
        (manifest.invariants[1], 40),
        (manifest.budget, 31),
        (manifest.promotion, 32),
    ]
    for record, line in lines:
        span = record.span
        assert span is not None, record
        assert (span.file, span.line) == ("p.yaml", line), record


def test_a_record_not_read_from_a_document_has_no_span() -> None:
    assert KeySpec("k", None, None, ("keys", 0)).span is None


def test_equality_leaves_the_source_map_out() -> None:
    one, two = build_manifest(_document()), build_manifest(_document())
    assert one.models == two.models
    assert one.keys == two.keys
    assert hash(one.invariants) == hash(two.invariants)
    assert "source_map" not in repr(one.keys[0])


def test_records_are_frozen(manifest: PipelineManifest) -> None:
    with pytest.raises(TypeError):
        manifest.models["x"] = manifest.models["main"]  # type: ignore[index]
    with pytest.raises(TypeError):
        manifest.inputs["x"] = manifest.inputs["topic"]  # type: ignore[index]
    for record in (manifest, manifest.keys[0], manifest.models["main"], manifest.budget):
        with pytest.raises(AttributeError):
            record.unknown = 1  # type: ignore[union-attr]
    assert isinstance(manifest.keys, tuple)
    assert isinstance(manifest.invariants, tuple)


def test_a_minimal_pipeline_has_empty_sections() -> None:
    manifest = build_manifest(_document("apiVersion: converge-dsl/v1\nkind: Pipeline\nname: m\n"))
    assert (manifest.keys, manifest.packs, manifest.repositories, manifest.invariants) == (
        (),
        (),
        (),
        (),
    )
    assert (dict(manifest.inputs), dict(manifest.models)) == ({}, {})
    assert (manifest.budget, manifest.promotion) == (BudgetSpec(), PromotionSpec())
    assert (manifest.on_error, manifest.description, tuple(manifest.seeds)) == (None, None, ())


def test_model_spec_converts_a_hand_written_entry() -> None:
    spec = model_spec("x", {"adapter": "openai", "base_url": "u", "model": "m", "retries": None})
    assert isinstance(spec, HttpModelSpec)
    assert (spec.path, spec.span, dict(spec.numbers)) == ((), None, {})


def test_the_checks_read_the_manifest_the_facts_build_once() -> None:
    facts = PipelineFacts(_document())
    assert facts.manifest is facts.manifest
    assert facts.models == {"main", "old", "fast", "claude"}
    assert facts.packs == {"optimization"}
    assert facts.inputs == {"topic", "region", "nothing"}
    assert {"risks", "notes"} <= facts.declared_keys
    assert dict(facts.key_schemas) == {"risks": {"type": "object"}}
