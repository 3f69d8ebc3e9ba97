"""compile_pipeline / compile_context: keys, inputs, budgets, located compile errors (CD6xx)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from converge_dsl import codes
from converge_dsl.compiler import compile_context
from converge_dsl.engine import BUILTIN_KEYS, Budget, PromotionPolicy
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend import load_text

Compile = Callable[..., Any]  # the `compile_yaml` fixture of conftest.py
HEADER = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\n"


def test_compile_context_resolves_keys_inputs_and_scopes() -> None:
    document = load_text(
        HEADER + "keys: [{name: risks}]\ninputs: {a: {default: 1}, b: {}}\n", "p.yaml"
    )
    ctx = compile_context(document, inputs={"b": "x"}, models={}, usage=None)  # type: ignore[arg-type]
    assert ctx.pipeline == "t"
    assert ctx.declared_keys == (*BUILTIN_KEYS, "risks")
    assert dict(ctx.inputs) == {"a": 1, "b": "x"}
    assert ctx.source("r") == "r@t"
    with pytest.raises(UsageError, match="unknown input 'c'"):
        compile_context(document, inputs={"c": 1}, models={}, usage=None)  # type: ignore[arg-type]


def test_budget_and_promotion_are_the_engines_objects(compile_yaml: Compile) -> None:
    compiled = compile_yaml(
        "budget: {max_cycles: 7}\npromotion: {gated_keys: [strategies]}\non_error: diagnose\n"
    )
    assert compiled.budget == Budget(max_cycles=7)
    assert compiled.budget.max_facts == 10_000
    assert compiled.promotion == PromotionPolicy(gated_keys=("strategies",))
    assert compiled.promotion.min_confidence == 0.5
    assert compiled.on_error == "diagnose"


def test_settings_defaults_come_from_the_engine(compile_yaml: Compile) -> None:
    compiled = compile_yaml("")
    assert (compiled.budget, compiled.promotion, compiled.on_error) == (
        Budget(),
        PromotionPolicy(),
        "stop",
    )


@pytest.mark.parametrize(
    ("emit_id", "code"),
    [
        ("'{{ count('", codes.COMPILE_TEMPLATE_SYNTAX),
        ("'{{ nope }}'", codes.COMPILE_UNKNOWN_NAME),
    ],
)
def test_template_problems_are_located_cd6xx(
    compile_yaml: Compile, emit_id: str, code: str
) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        compile_yaml(
            "suggestors:\n"
            "  - name: r\n"
            "    kind: rule\n"
            f"    emit: [{{key: strategies, id: {emit_id}, content: x}}]\n"
        )
    (diagnostic,) = caught.value.diagnostics
    assert diagnostic.code == code
    assert (diagnostic.file, diagnostic.line) == ("p.yaml", 7)


def test_unavailable_kind_is_cd602(compile_yaml: Compile) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        compile_yaml("suggestors:\n  - {name: r, kind: telepathy}\n")
    assert caught.value.diagnostics[0].code == codes.COMPILE_KIND_UNAVAILABLE


def test_invariant_check_and_message(compile_yaml: Compile) -> None:
    from converge_dsl.engine import Context

    compiled = compile_yaml(
        "invariants:\n"
        "  - {name: two, class: acceptance, check: \"count('seeds') >= 2\","
        " message: \"only {{ count('seeds') }}\"}\n"
    )
    (invariant,) = compiled.invariants
    assert invariant.check(Context.from_facts((), cycle=1)) == "only 0"
