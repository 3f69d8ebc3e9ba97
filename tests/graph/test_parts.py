"""What the graph draws besides reads and writes: an agent's contributors, tools and
summarizer, the keys an invariant reads, and the version the lock pins."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.graph import graph_pipeline
from converge_dsl.graph._build import keys_read

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("check", "read"),
    [
        ("count('evaluations') >= count('strategies')", ("strategies", "evaluations")),
        ('has("signals") and fact("seeds", "x") is not none', ("seeds", "signals")),
        ("facts.strategies | length > 0 and data_of('tickets')", ("strategies", "tickets")),
        ("proposals['signals'] | length == 0", ("signals",)),
        ("'strategies' in inputs.words and count('tickets_old') > 0", ()),
    ],
)
def test_the_keys_an_invariant_reads(check: str, read: tuple[str, ...]) -> None:
    assert keys_read(check, ("seeds", "strategies", "signals", "evaluations", "tickets")) == read


def test_an_agents_contributors_tools_and_summarizer_are_drawn() -> None:
    graph = graph_pipeline(ROOT / "pipelines" / "agent-review.yaml", inputs={})
    edges = {(e.source, e.target, e.relation) for e in graph.edges}
    assert ("key:constraints", "suggestor:reviewer", "informs") in edges  # a facts contributor
    assert ("suggestor:reviewer", "model:default", "summarizes") in edges
    assert ("suggestor:reviewer", "model:default", "calls") in edges
    (agent,) = graph.of_kind("suggestor")
    assert dict(agent.parts) == {
        "tools": ("context.read", "context.propose", "finish"),
        "contributors": ("remind-goal (reminder)", "constraints (facts)"),
    }
    details = dict(agent.details)
    assert details["summarizer"] == "model default, clears turns older than 2"
    (invariant,) = graph.invariants
    assert invariant.keys == ("strategies", "evaluations")
    keys = {node.name: dict(node.details) for node in graph.of_kind("key")}
    assert keys["constraints"]["informs"] == "reviewer"
    assert keys["evaluations"]["checked by"] == "every-strategy-evaluated"


def test_a_summarizer_on_its_own_model_does_not_make_the_agent_call_it(tmp_path: Path) -> None:
    text = (ROOT / "pipelines" / "agent-review.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "  default: {adapter: scripted",
        "  cheap: {adapter: scripted, script: agent-review.script.yaml}\n"
        "  default: {adapter: scripted",
        1,
    )
    text = text.replace(
        "    summarizer:\n      model: default", "    summarizer:\n      model: cheap"
    )
    (tmp_path / "a.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "agent-review.script.yaml").write_text(
        (ROOT / "pipelines" / "agent-review.script.yaml").read_text(encoding="utf-8")
    )
    graph = graph_pipeline(tmp_path / "a.yaml", inputs={})
    edges = {(e.target, e.relation) for e in graph.edges if e.source == "suggestor:reviewer"}
    assert ("model:cheap", "summarizes") in edges
    assert ("model:cheap", "calls") not in edges
    assert ("model:default", "calls") in edges


def test_a_pack_node_shows_the_locked_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONVERGE_DSL_CACHE", str(tmp_path / "cache"))
    for name in ("support-triage.yaml", "support-triage.script.yaml"):
        (tmp_path / name).write_bytes((ROOT / "pipelines" / name).read_bytes())
    pipeline = tmp_path / "support-triage.yaml"
    assert run(["lock", str(pipeline)], io.StringIO(), io.StringIO()) == 0
    (pack,) = graph_pipeline(pipeline, inputs={}).of_kind("pack")
    details = dict(pack.details)
    assert (details["version"], details["requires"]) == ("1.0.0", ">=1.0,<2")
    assert details["locked"].startswith("builtin, sha256 ")
