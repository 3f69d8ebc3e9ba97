from __future__ import annotations

import pytest

from converge_dsl.templating import GLOBALS, TemplateRenderError, compile_template, render

ATTACKS = [
    "{{ ''.__class__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ self._TemplateReference__context }}",
    "{{ lipsum() }}",
    "{{ range(100000000) | list }}",
    "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}",
    "{{ 'a' * 100000000 }}",
    "{{ 2 ** 100000000 }}",
    "{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('ab') }}",
    "{{ 'x'.ljust(1000000000) }}",
    "{{ '%0999999999d' % 1 }}",
    "{{ [1] | batch(1000000000, 'x') | list }}",
    "{% for i in range(9000) %}{{ 'x' * 200 }}{% endfor %}",
]


@pytest.mark.parametrize("source", ATTACKS)
def test_attack_is_refused_or_bounded(source: str) -> None:
    with pytest.raises(TemplateRenderError):
        render(compile_template(source), dict(GLOBALS))


def test_error_carries_the_template_line() -> None:
    with pytest.raises(TemplateRenderError) as info:
        render(compile_template("ok\nok\n{{ ''.__class__ }}"), dict(GLOBALS))
    assert info.value.lineno == 3
    assert "unsafe" in info.value.message


def test_ordinary_templates_still_work() -> None:
    scope = {**GLOBALS, "xs": [3, 1, 2]}
    assert (
        render(compile_template("{{ xs | sort | join(',') }} {{ 'ab' * 2 }} {{ 2 ** 10 }}"), scope)
        == "1,2,3 abab 1024"
    )
