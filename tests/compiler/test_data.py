"""Facts carry data: key schemas, seeds, rule emits and llm answers produce it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.compiler import compile_settings
from converge_dsl.engine import (
    Context,
    Fact,
    PromotionRecord,
    ProposedFact,
    Provenance,
    canonical_json,
)
from converge_dsl.engine.types import freeze_json
from converge_dsl.errors import PipelineInvalid, TemplateRunError
from converge_dsl.frontend import load_text

Compile = Callable[..., Any]  # the `compile_yaml` fixture of conftest.py
HEADER = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\n"
TICKETS = """\
keys:
  - name: tickets
    schema:
      type: object
      required: [category]
      properties: {category: {enum: [billing, bug]}, urgent: {type: boolean}}
"""


def _fact(key: str, fid: str, data: Any = None, content: str = "c") -> Fact:
    record = PromotionRecord("auto", "engine", 1)
    return Fact(key, fid, content, Provenance("s@t"), 1.0, record, data=freeze_json(data))


def _run(suggestor: Any, *facts: Fact) -> tuple[ProposedFact, ...]:
    effect = asyncio.run(suggestor.execute(Context.from_facts(facts, cycle=1)))
    return tuple(effect.proposals)


# --- key schemas and seeds --------------------------------------------------------


def test_key_schemas_reach_the_settings_and_the_promotion_policy() -> None:
    settings = compile_settings(load_text(HEADER + TICKETS, "p.yaml"), inputs={})
    schema = settings.key_schemas["tickets"]
    assert schema["required"] == ["category"]
    assert json.loads(canonical_json(settings.promotion.key_schemas)) == {"tickets": schema}
    bare = compile_settings(load_text(HEADER, "p.yaml"), inputs={})
    assert dict(bare.promotion.key_schemas) == {}


def test_an_invalid_key_schema_is_a_located_compile_error() -> None:
    body = "keys:\n  - name: tickets\n    schema: {type: object, properties: {a: {type: strng}}}\n"
    with pytest.raises(PipelineInvalid) as caught:
        compile_settings(load_text(HEADER + body, "p.yaml"), inputs={})
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == codes.COMPILE_BAD_KEY_SCHEMA == "CD605"
    assert diagnostic.message.startswith("the schema of key 'tickets' is not a valid JSON Schema")
    assert (diagnostic.span.line, diagnostic.span.column) == (6, 51)


def test_seeds_carry_data_and_legacy_object_content_becomes_data() -> None:
    body = """\
seeds:
  - {id: a, content: "Refund", data: {category: billing}}
  - {id: b, content: {category: bug, size: 2}}
  - {id: c, content: text}
"""
    a, b, c = compile_settings(load_text(HEADER + body, "p.yaml"), inputs={}).seeds
    assert (a.content, a.data) == ("Refund", {"category": "billing"})
    assert (b.content, b.data) == ('{"category":"bug","size":2}', {"category": "bug", "size": 2})
    assert (c.content, c.data) == ("text", None)


def test_seed_suggestor_facts_carry_data(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - name: s
            kind: seed
            facts:
              - {id: a, content: "t {{ cycle }}", data: [1, {x: "{{ not a template }}"}]}
              - {id: b, content: {num: "{{ cycle }}"}}
        """
    )
    a, b = _run(compiled.suggestors[0])
    assert (a.content, a.data) == ("t 1", (1, {"x": "{{ not a template }}"}))
    assert (b.content, b.data) == ('{"num":"1"}', {"num": "1"})


# --- rule emits ---------------------------------------------------------------------


def test_rule_data_is_an_expression_over_the_emit_scope(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        """\
        suggestors:
          - name: route
            kind: rule
            dependencies: [seeds]
            emit:
              - key: hypotheses
                id: "route-{{ facts.seeds[0].id }}"
                content: "Route {{ facts.seeds[0].data.category }}"
                data: "{'ticket': facts.seeds[0].id, 'queue': facts.seeds[0].data['category']}"
              - {key: hypotheses, id: copy, content: copy, data: "fact('seeds', 't1').data"}
              - {key: hypotheses, id: all, content: all, data: "data_of('seeds')"}
              - {key: hypotheses, id: const, content: c, data: "[1, 2.5, true, none, 'x']"}
              - {key: hypotheses, id: none, content: plain}
        """
    )
    seeds = (_fact("seeds", "t1", {"category": "billing"}), _fact("seeds", "t2", [3]))
    route, copy, every, const, none = _run(compiled.suggestors[0], *seeds)
    assert (route.id, route.content) == ("route-t1", "Route billing")
    assert route.data == {"ticket": "t1", "queue": "billing"}
    assert copy.data == {"category": "billing"}
    assert every.data == ({"category": "billing"}, (3,))
    assert const.data == (1, 2.5, True, None, "x")
    assert none.data is None


@pytest.mark.parametrize(
    ("expression", "message", "hint"),
    [
        ("facts.seeds", "emit[0].data is not a JSON value: a Fact at /0", "fact.data"),
        ("{'k': facts.seeds | map(attribute='id')}", "a lazy sequence at /k", "| list"),
        ("{'k': 1e308 * 10}", "the number inf at /k", "finite"),
        ("{1: 'x'}", "the key 1 at /", "keys are text"),
        ("{'a/b': {'c': cycle.__class__}}", "/a~1b/c is undefined: access to", None),
    ],
)
def test_rule_data_that_is_not_json_is_a_located_run_error(
    compile_yaml: Compile, expression: str, message: str, hint: str | None
) -> None:
    compiled = compile_yaml(
        f"""\
        suggestors:
          - name: route
            kind: rule
            dependencies: [seeds]
            emit:
              - {{key: hypotheses, id: h, content: c, data: "{expression}"}}
        """
    )
    with pytest.raises(TemplateRunError) as caught:
        _run(compiled.suggestors[0], _fact("seeds", "t1"))
    error = caught.value
    assert message in error.message
    assert (error.suggestor, error.cycle) == ("route", 1)
    assert error.span is not None
    assert error.span.line == 9
    if hint is not None:
        assert error.hint is not None
        assert hint in error.hint


def test_rule_data_reading_an_unknown_name_is_a_compile_error(compile_yaml: Compile) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        compile_yaml(
            """\
            suggestors:
              - name: route
                kind: rule
                emit: [{key: hypotheses, id: h, content: c, data: "factz.seeds"}]
            """
        )
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == codes.COMPILE_UNKNOWN_NAME
    assert diagnostic.path == ("suggestors", 0, "emit", 0, "data")
