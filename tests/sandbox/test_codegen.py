"""A part of a template that fails whenever it runs is refused alike by `validate` and the compiler.

Before, `{% include %}` (and import, from-import, extends), a call of a
literal (`{{ 3(1) }}`) and `'%'` formatting of a literal text passed
`validate`, and the run failed at the suggestor's turn, the first with
Jinja's "TypeError: no loader for this environment specified".
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.frontend import expression_error
from converge_dsl.sandbox._templating import (
    GLOBALS,
    TemplateCompileError,
    TemplateRenderError,
    compile_expression,
    compile_template,
    render,
)

REFUSED = [
    ("{% include 'x' %}", "'{% include %}' is not available"),
    ("{% import 'x' as y %}", "'{% import %}' is not available"),
    ("{% from 'x' import y %}", "'{% from ... import %}' is not available"),
    ("{% if false %}{% extends 'x' %}{% endif %}", "'{% extends %}' is not available"),
    ("{{ 3(1) }}", "a literal .* is not callable"),
    ("{{ x or 'a'() }}", "a literal .* is not callable"),
    ("{{ [1](2) }}", "a literal .* is not callable"),
    ("{{ '%s' % x }}", "'%' string formatting is refused"),
]


@pytest.mark.parametrize(("text", "why"), REFUSED)
def test_the_compiler_refuses_it(text: str, why: str) -> None:
    with pytest.raises(TemplateCompileError, match=why):
        compile_template(text)


@pytest.mark.parametrize("text", ["3(1) > 0", "'a'() == x", "'%d' % 3 == x", "('%d' % x) == '1'"])
def test_validate_finds_the_same_error_in_an_expression(text: str) -> None:
    with pytest.raises(TemplateCompileError) as raised:
        compile_expression(text)
    assert expression_error(text) == raised.value.message


@pytest.mark.parametrize(
    ("text", "out"),
    [
        ("{{ 7 % 2 }}", "1"),
        ("{{ x % 2 }}", "1"),
        ("{{ x(2) if false else 'ok' }}", "ok"),
        ("{% macro m() %}m{% endmacro %}{{ m() }}", "m"),
        ("{{ 'a b'.split() | join('-') }}", "a-b"),
    ],
)
def test_calls_and_modulo_that_can_work_still_compile(text: str, out: str) -> None:
    assert render(compile_template(text), {"x": 3, **GLOBALS}) == out


def test_the_compiler_reads_the_tree_validate_reads_before_folding_it() -> None:
    # Jinja folds `('a' ~ '%s')` into a literal text while it generates code: the compiler
    # refused what validate, reading the tree as parsed, let pass. Both let it pass now;
    # the run refuses the formatting when it renders (check_binop).
    text = "{{ ('a' ~ '%s') % 1 }}"
    assert expression_error(text[3:-3]) is None
    template = compile_template(text)
    with pytest.raises(TemplateRenderError, match="'%' string formatting is refused"):
        render(template, dict(GLOBALS))


PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: refused
suggestors:
  - name: start
    kind: seed
    target: seeds
    facts: [{id: s, content: go}]
  - name: echo
    kind: rule
    dependencies: [seeds]
    emit:
      - key: signals
        id: x
        content: |
          first line
          {% include 'header.txt' %}
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_validate_and_run_report_it_at_its_line(tmp_path: Path, command: str) -> None:
    pipeline = tmp_path / "refused.yaml"
    pipeline.write_text(PIPELINE)
    out, err = io.StringIO(), io.StringIO()
    code = run([command, str(pipeline)], out, err)
    shown = out.getvalue() + err.getvalue()
    assert code == 2
    assert "error[CD206]: template does not compile: '{% include %}' is not available" in shown
    assert "refused.yaml:17:" in shown
    assert "Traceback" not in shown
    assert "no loader" not in shown
