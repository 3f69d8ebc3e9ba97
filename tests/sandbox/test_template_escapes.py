"""A template string with an escape Python does not know is parsed without a warning."""

from __future__ import annotations

import warnings

import pytest

from converge_dsl.frontend import _jinja_parse
from converge_dsl.sandbox import _codegen, environment


@pytest.mark.parametrize("expression", [True, False])
def test_an_unknown_escape_in_a_string_literal_warns_of_nothing(expression: bool) -> None:
    """Jinja's lexer kept `'\\e'` as written and warned (DeprecationWarning) on every parse:
    a user of `converge-dsl test` saw it in pytest's warnings summary."""
    source = "'a\\eb' ~ 'c'" if expression else "{{ 'a\\eb' ~ 'c' }}"
    _jinja_parse.parse.cache_clear()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ast, problem = _jinja_parse.parse(source, expression)
        _codegen.parse(environment(), source, expression=expression)
    assert ast is not None
    assert problem is None
    assert [str(w.message) for w in seen] == []


def test_other_warnings_are_still_shown() -> None:
    from converge_dsl.sandbox._template_escapes import quiet_escapes

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_escapes():
            warnings.warn("something else", DeprecationWarning, stacklevel=1)
    assert [str(w.message) for w in seen] == ["something else"]
