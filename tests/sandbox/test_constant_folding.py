"""A constant part that always fails is one error, found alike by `validate` and the compiler.

Jinja folds the constant parts of a template while it generates code; in the
sandbox a lookup on a literal that finds nothing is an undefined value, and
testing it for truth (`[0]['m'] and x`) raised `UndefinedError` out of the
code generator: `validate` said the pipeline was valid and `run` ended in a
traceback. Now the compiler refuses such a template with `TemplateCompileError`,
and `validate` reports the same words at the template's place.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from converge_dsl.cli import run
from converge_dsl.frontend import expression_error
from converge_dsl.sandbox._templating import (
    TemplateCompileError,
    compile_expression,
    compile_template,
)

ALWAYS_FAILING = [
    ("[0]['m'] and a", "'list object' has no attribute 'm'"),
    ("{'k': 1}.other or a", "'dict object' has no attribute 'other'"),
    ("[[1]][0].x and a", "'list object' has no attribute 'x'"),
    ("('s')['q'] or a", "'str object' has no attribute 'q'"),
]


@pytest.mark.parametrize(("text", "why"), ALWAYS_FAILING)
def test_the_compiler_refuses_it_with_a_compile_error(text: str, why: str) -> None:
    with pytest.raises(TemplateCompileError, match="a constant part always fails"):
        compile_expression(text)
    with pytest.raises(TemplateCompileError, match="a constant part always fails"):
        compile_template("{{ " + text + " }}")


@pytest.mark.parametrize(("text", "why"), ALWAYS_FAILING)
def test_validate_finds_the_same_error(text: str, why: str) -> None:
    assert expression_error(text) == f"a constant part always fails: {why}"


@pytest.mark.parametrize("text", ["[1][0] and a", "not [0]['m']", "{'k': 1}.k and a"])
def test_constant_parts_that_fold_are_fine(text: str) -> None:
    assert expression_error(text) is None
    compile_expression(text)


PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: folding
suggestors:
  - name: start
    kind: seed
    target: seeds
    facts: [{id: s, content: go}]
  - name: check
    kind: rule
    dependencies: [seeds]
    when: "[0]['m'] and has('seeds')"
    emit: [{key: signals, id: x, content: flagged}]
"""


@pytest.mark.parametrize("command", ["validate", "run"])
def test_no_command_ends_in_a_traceback(tmp_path: Path, command: str) -> None:
    pipeline = tmp_path / "folding.yaml"
    pipeline.write_text(PIPELINE)
    out, err = io.StringIO(), io.StringIO()
    code = run([command, str(pipeline)], out, err)
    shown = out.getvalue() + err.getvalue()  # validate reports on stdout, run on stderr
    assert code == 2
    assert "error[CD207]: expression does not compile: a constant part always fails: " in shown
    assert "folding.yaml:12:11" in shown
    assert "Traceback" not in shown
