"""Suggestor kinds as objects: the registry, typed specs, the composed schema (§16)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from converge_dsl import frontend
from converge_dsl._resources import read_schema_text
from converge_dsl.frontend import KINDS, KindRegistry, load_text, pipeline_schema
from converge_dsl.validation import KINDS as ALL_KINDS

ROOT = Path(__file__).resolve().parents[2]

PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: p
keys: [{name: risks}]
models: {m: {adapter: scripted, script: s.yaml}}
packs: {optimization: ">=1"}
suggestors:
  - {name: s, kind: seed, target: risks, facts: [{id: a, content: "x {{ cycle }}", data: 1}]}
  - name: r
    kind: rule
    dependencies: [risks]
    when: "count('risks') > 0"
    emit: [{key: strategies, id: b, content: c, data: "1"}, {key: risks, id: d, content: e}]
  - name: l
    kind: llm
    model: m
    target: hypotheses
    prompt: {user: "u"}
    output: {format: json, content: "{{ item.name }}", schema: {type: object}}
  - name: a
    kind: agent
    model: m
    target: evaluations
    goal: "g {{ cycle }}"
    contributors: [{kind: facts, keys: [constraints]}, {kind: reminder, every: 1, text: t}]
    summarizer: {model: m, clear_turns_older_than: 2, prompt: "{{ span }}"}
  - {name: k, kind: pack, use: optimization/assignment, input: constraints, output: strategies}
"""


def _specs() -> list[frontend.SuggestorSpec]:
    return list(ALL_KINDS.specs(load_text(PIPELINE, "p.yaml").data))


def test_the_shipped_pipeline_schema_is_the_composition_of_the_built_in_kinds() -> None:
    shipped = json.loads(read_schema_text("pipeline.v1.json"))
    composed = pipeline_schema([ALL_KINDS.kind(name) for name in ALL_KINDS.names])
    assert composed == shipped
    assert json.dumps(composed, indent=2, ensure_ascii=False) + "\n" == read_schema_text(
        "pipeline.v1.json"
    )
    branches = [b["then"]["$ref"] for b in shipped["$defs"]["suggestor"]["allOf"]]
    assert branches == [f"#/$defs/{ALL_KINDS.kind(n).branch}" for n in ALL_KINDS.names]


def test_a_composition_without_a_kind_refuses_it() -> None:
    composed = pipeline_schema([KINDS.kind(name) for name in KINDS.names])
    kinds = composed["$defs"]["suggestor"]["properties"]["kind"]["enum"]
    assert kinds == ["seed", "rule", "llm", "tool"]


def test_each_spec_says_what_it_reads_and_writes() -> None:
    specs = _specs()
    assert [s.kind for s in specs] == ["seed", "rule", "llm", "agent", "pack"]
    assert [s.targets for s in specs] == [
        ("risks",),
        ("strategies", "risks"),
        ("hypotheses",),
        ("evaluations",),
        ("strategies",),
    ]
    assert specs[1].dependencies == ("risks",)
    assert [k for _, k in specs[3].key_references()] == ["evaluations", "constraints"]
    assert [k for _, k in specs[4].key_references()] == ["constraints", "strategies"]
    assert [m for _, m in specs[3].model_references()] == ["m", "m"]
    assert specs[4].models_used() == {"default"}
    assert specs[4].pack_references() == ((("suggestors", 4, "use"), "optimization"),)


def test_each_spec_lists_its_templates_with_the_names_in_scope() -> None:
    sites = {site.path: site for spec in _specs() for site in spec.templates()}
    assert (
        sites[("suggestors", 0, "facts", 0, "content")].names
        == frontend.TemplateSite((), "", False, sites[("suggestors", 1, "when")].names).names
    )
    assert sites[("suggestors", 1, "when")].expression
    assert sites[("suggestors", 1, "emit", 0, "data")].expression
    assert "item" in sites[("suggestors", 2, "output", "content")].names
    assert "item" not in sites[("suggestors", 2, "prompt", "user")].names
    assert "turn" in sites[("suggestors", 3, "contributors", 1, "text")].names
    assert sites[("suggestors", 3, "summarizer", "prompt")].names == {"span"}
    assert not [path for path in sites if path[1] == 4]  # a pack suggestor has no template


def test_data_and_schema_sites() -> None:
    specs = _specs()
    assert [(d.key, d.value, d.expression) for d in specs[0].data_sites()] == [("risks", 1, False)]
    assert [(d.key, d.value, d.expression) for d in specs[1].data_sites()] == [
        ("strategies", "1", True)
    ]
    assert specs[2].schemas() == (
        ("output.schema", ("suggestors", 2, "output", "schema"), {"type": "object"}),
    )
    assert specs[2].items() == (("suggestors", 2, "output"), {"type": "object"})


def test_the_registry_is_immutable_and_resolves_references_lazily() -> None:
    registry = KindRegistry({"seed": KINDS.kind("seed"), "later": "converge_dsl.frontend:KINDS"})
    grown = registry.with_kinds({"rule": KINDS.kind("rule")})
    assert registry.names == ("seed", "later")
    assert grown.names == ("seed", "later", "rule")
    assert registry.get("no-such-kind") is None
    with pytest.raises(KeyError):
        registry.kind("no-such-kind")


def test_the_front_end_registers_seed_rule_llm_and_tool_and_validation_agent_and_pack() -> None:
    assert KINDS.names == ("seed", "rule", "llm", "tool")
    assert ALL_KINDS.names == ("seed", "rule", "llm", "tool", "agent", "pack")


def test_naming_the_kinds_imports_no_agent_or_pack_module() -> None:
    code = (
        "import sys\n"
        "from converge_dsl.validation import KINDS\n"
        "KINDS.kind('rule')\n"
        "assert not [m for m in sys.modules if m.startswith(('converge_dsl.agents',"
        " 'converge_dsl.packs'))], sorted(sys.modules)\n"
        "KINDS.kind('agent')\n"
        "assert 'converge_dsl.agents._kind' in sys.modules\n"
        "assert 'converge_dsl.agents._agent' not in sys.modules\n"
        "assert 'importlib.metadata' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
