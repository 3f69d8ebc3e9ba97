"""Calls of the context functions whose arguments do not fit them are CD286 in `validate`.

Before, `when: "fact('signals')"` passed validate and the run failed at the
suggestor's turn with "TypeError: _helpers.<locals>.fact() missing 1 required
positional argument: 'fact_id'".
"""

from __future__ import annotations

import pytest

from converge_dsl.frontend._dataflow import misfit_calls


@pytest.mark.parametrize(
    ("text", "expression", "found"),
    [
        ("fact('k')", True, [("fact", "fact() without 'fact_id'")]),
        ("count() > 1", True, [("count", "count() without 'key'")]),
        ("has('a', 'b')", True, [("has", "has() with 2 arguments; it takes 1")]),
        ("has(key='a', x=1)", True, [("has", "has() with an argument 'x' it does not take")]),
        ("fact('a', key='b')", True, [("fact", "fact() with 'key' twice")]),
        ("{{ data_of() | length }}", False, [("data_of", "data_of() without 'key'")]),
        # Jinja's tree (a statement): the same finding
        ("{% if x %}{{ fact(k) }}{% endif %}", False, [("fact", "fact() without 'fact_id'")]),
    ],
)
def test_a_call_that_does_not_fit_is_found(
    text: str, expression: bool, found: list[tuple[str, str]]
) -> None:
    assert list(misfit_calls(text, expression)) == found


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ("fact('a', 'b') and count('a') > has('b') + data_of('c') | length", True),
        ("fact(key='a', fact_id='b') or count(key='a')", True),
        ("{% set count = range %}{{ count(1, 2) }}", False),  # the template's own
        ("{% for fact in facts.seeds %}{{ fact() }}{% endfor %}", False),
        ("{% macro count(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ count(1, 2) }}", False),
        ("count(*args)", True),  # spread arguments: not known before the run
    ],
)
def test_calls_that_fit_or_are_not_the_context_functions_pass(text: str, expression: bool) -> None:
    assert misfit_calls(text, expression) == ()


def test_the_parameters_validate_knows_are_the_context_functions_own() -> None:
    # `PARAMETERS` is written out for validate (which must not build a scope); a change to
    # the functions the run hands its templates must change it too.
    import inspect

    from converge_dsl.compiler._scope import _helpers
    from converge_dsl.frontend._dataflow import CALLED_AS, PARAMETERS

    helpers = _helpers(None)  # type: ignore[arg-type]  # the functions, never called here
    assert sorted(PARAMETERS) == sorted(helpers) == sorted(CALLED_AS)
    for name, function in helpers.items():
        assert tuple(inspect.signature(function).parameters) == PARAMETERS[name], name
