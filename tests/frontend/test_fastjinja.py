"""The regex fast path agrees with Jinja on every template it accepts."""

from __future__ import annotations

import pytest

from converge_dsl.frontend import _fastjinja
from converge_dsl.templating import undeclared_names

SAMPLES = [
    ("Act on {{ facts.hypotheses | map(attribute='content') | join(', ') }}", False),
    ("count('hypotheses') >= 3 and not has('risks') or cycle > 2", True),
    ("c-{{ item.id }}-{{ index + 1 }}", False),
    ("{{ inputs.market }}", False),
    ("fact('seeds', 'a') and true", True),
]


@pytest.mark.parametrize(("text", "expression"), SAMPLES)
def test_fast_path_matches_jinja(text: str, expression: bool) -> None:
    quick = _fastjinja.analyse(text, expression=expression)
    assert quick is not None
    assert quick[0] == undeclared_names(text, expression=expression)


@pytest.mark.parametrize(
    "text", ["{{ x", "{% if x %}y{% endif %}", "{{ a == and }}", "{{ x is defined }}"]
)
def test_anything_else_goes_to_jinja(text: str) -> None:
    assert _fastjinja.analyse(text, expression=False) is None
