"""`free_names` folds nothing a template controls.

Jinja's code generator folds constant parts as it visits them; the name analysis
ran it in a plain environment, so Python's operators and Jinja's own filters ran
on them without the sandbox's bounds: `validate` of `{% if true %}{{ ('ab' *
300000000)|upper }}{% endif %}` held 1.8 GB for eight seconds, and `('a\\n' *
100000)|indent(100000)` did not end (the run refuses both in milliseconds).
"""

from __future__ import annotations

import tracemalloc

import pytest

from converge_dsl.frontend._jinja_parse import free_names, parse

# Each folds into text of at least 2,000,000 characters in a plain environment.
COSTLY = [
    "{% if true %}{{ ('ab' * 1000000)|upper }}{% endif %}",
    "{{ ('a\\n' * 1000)|indent(2000) }}{{ x }}",
    "{{ ('ab' * 1000000)|length + x }}",
    "{{ ('ab' * 1000000) is string and x }}",
]


@pytest.mark.parametrize("text", COSTLY)
def test_the_name_analysis_folds_no_operator_or_filter(text: str) -> None:
    ast, error = parse(text, False)
    assert ast is not None
    assert error is None
    tracemalloc.start()
    try:
        names = free_names(ast)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert names <= {"x"}
    assert peak < 500_000


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("{{ x|default('a' ~ 'b')|upper }}", {"x"}),
        ("{% for i in [1, 2]|map('string') %}{{ i ~ y }}{% endfor %}", {"y"}),
        ("{% set z = 2 * 3 %}{{ z + w }}", {"w"}),
    ],
)
def test_free_names_are_still_found(text: str, names: set[str]) -> None:
    ast, _ = parse(text, False)
    assert ast is not None
    assert free_names(ast) == names
