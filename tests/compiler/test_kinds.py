"""seed and rule suggestors: rendering, idempotent default `accepts`, provenance."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from converge_dsl.compiler import CompiledTemplate
from converge_dsl.engine import Context, Fact, PromotionRecord, ProposedFact, Provenance
from converge_dsl.errors import TemplateRunError

Compile = Callable[..., Any]  # the `compile_yaml` fixture of conftest.py


def _fact(key: str, fid: str, source: str, content: str = "c") -> Fact:
    return Fact(key, fid, content, Provenance(source), 1.0, PromotionRecord("auto", "engine", 1))


def _ctx(*facts: Fact, cycle: int = 3) -> Context:
    return Context.from_facts(facts, cycle=cycle)


def _run(suggestor: object, ctx: Context) -> tuple[ProposedFact, ...]:
    return asyncio.run(suggestor.execute(ctx)).proposals  # type: ignore[attr-defined]


def test_rule_renders_templated_id_content_confidence(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        inputs: {market: {default: tea}}
        suggestors:
          - name: r
            kind: rule
            dependencies: [seeds]
            emit:
              - key: strategies
                id: "s-{{ cycle }}"
                content: "{{ inputs.market }}: {{ facts.seeds | map(attribute='content') | join }}"
                confidence: "{{ 0.25 * count('seeds') }}"
              - {key: hypotheses, id: h, content: {text: "n={{ count('seeds') }}", fixed: 2}}
        """
    )
    (rule,) = compiled.suggestors
    ctx = _ctx(_fact("seeds", "a", "x", "A"), _fact("seeds", "b", "x", "B"))
    first, second = _run(rule, ctx)
    assert (first.key, first.id, first.content, first.confidence) == (
        "strategies",
        "s-3",
        "tea: AB",
        0.5,
    )
    # legacy: an object as content is the data, its canonical JSON text the content
    assert second.content == '{"fixed":2,"text":"n=2"}'
    assert second.data == {"text": "n=2", "fixed": 2}
    assert first.data is None
    assert first.provenance == Provenance("r@t")
    assert rule.provenance() == Provenance("r@t")
    assert rule.dependencies == ("seeds",)
    assert compiled.spans["r"].line == 6


def test_seed_kind_targets_its_key(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - {name: s, kind: seed, target: signals, facts: [{id: "x{{ cycle }}", content: hi}]}
        """
    )
    (seed,) = compiled.suggestors
    (proposal,) = _run(seed, _ctx(cycle=1))
    assert (proposal.key, proposal.id, proposal.content, proposal.confidence) == (
        "signals",
        "x1",
        "hi",
        1.0,
    )


def test_pipeline_seeds_have_pipeline_provenance(compile_yaml: Compile) -> None:
    compiled = compile_yaml("seeds: [{id: a, content: x, confidence: 0.8}]\n")
    (seed,) = compiled.seeds
    assert (seed.key, seed.id, seed.confidence, seed.provenance) == (
        "seeds",
        "a",
        0.8,
        Provenance("seeds@t"),
    )


def test_idempotent_default_accepts_until_own_fact_exists(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - name: r
            kind: rule
            dependencies: [seeds]
            emit: [{key: strategies, id: s, content: x}]
        """
    )
    (rule,) = compiled.suggestors
    assert rule.accepts(_ctx(_fact("seeds", "a", "x")))
    # another suggestor's fact under the target does not count
    assert rule.accepts(_ctx(_fact("strategies", "o", "other@t")))
    assert not rule.accepts(_ctx(_fact("strategies", "s", "r@t")))
    pending = Context.from_facts(
        (), cycle=3, pending=[ProposedFact("strategies", "s", "x", 1.0, Provenance("r@t"))]
    )
    assert not rule.accepts(pending)


def test_when_expression_decides_accepts(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - name: r
            kind: rule
            when: "count('seeds') >= 2"
            emit: [{key: strategies, id: s, content: x}]
        """
    )
    (rule,) = compiled.suggestors
    assert not rule.accepts(_ctx(_fact("seeds", "a", "x")))
    assert rule.accepts(_ctx(_fact("seeds", "a", "x"), _fact("seeds", "b", "x")))


def test_render_error_is_located_with_suggestor_and_cycle(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - name: r
            kind: rule
            emit:
              - key: strategies
                id: s
                content: "{{ facts.seeds[3].content }}"
        """
    )
    with pytest.raises(TemplateRunError) as caught:
        _run(compiled.suggestors[0], _ctx(cycle=7))
    error = caught.value
    assert (error.suggestor, error.cycle) == ("r", 7)
    assert error.span is not None
    assert (error.span.file, error.span.line, error.span.column) == ("p.yaml", 10, 18)


def test_literal_template_skips_jinja_but_renders_the_same(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - {name: r, kind: rule, emit: [{key: strategies, id: plain, content: "a {b} c"}]}
        """
    )
    emission = compiled.suggestors[0].emissions[0]  # type: ignore[attr-defined]
    assert isinstance(emission.id, CompiledTemplate)
    assert emission.id.literal == "plain"
    assert _run(compiled.suggestors[0], _ctx())[0].content == "a {b} c"


def test_a_literal_rule_proposes_facts_built_once_and_runs_synchronously(
    compile_yaml: Compile,
) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - name: fixed
            kind: rule
            dependencies: [seeds]
            emit:
              - {key: strategies, id: s, content: plain, confidence: 0.5, data: "{'n': 1}"}
          - name: literal
            kind: rule
            dependencies: [seeds]
            emit: [{key: hypotheses, id: h, content: {text: plain}, confidence: 0.4}]
          - name: templated
            kind: rule
            dependencies: [seeds]
            emit: [{key: signals, id: "s-{{ cycle }}", content: x}]
        """
    )
    fixed, literal, templated = compiled.suggestors
    assert all(s.synchronous for s in compiled.suggestors)
    ctx = _ctx(_fact("seeds", "a", "x"))
    # A data expression is rendered per firing; literal emissions are built once.
    assert fixed.fixed is None
    assert literal.fixed is not None
    assert literal.propose(ctx) is literal.propose(_ctx(cycle=9))
    assert literal.propose(ctx) == asyncio.run(literal.execute(ctx))
    (proposal,) = literal.propose(ctx).proposals
    assert (proposal.id, proposal.content, proposal.confidence) == ("h", '{"text":"plain"}', 0.4)
    assert proposal.provenance == Provenance("literal@t")
    assert templated.fixed is None
    assert [p.id for p in templated.propose(ctx).proposals] == ["s-3"]
    assert fixed.propose(ctx).proposals[0].data == {"n": 1}
