"""Compiled templates and expressions that know where they came from.

A `CompiledTemplate` is compiled once (at compile time) and rendered many times
over a render scope (`_scope.RenderScopes`). A render error becomes a
`TemplateRunError` carrying the file:line:column of the failing template line,
the suggestor and the cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jinja2

from converge_dsl.diagnostics import JsonPath, SourceSpan
from converge_dsl.errors import TemplateRunError
from converge_dsl.frontend import LoadedDocument
from converge_dsl.templating import (
    GLOBALS,
    TemplateRenderError,
    as_json_data,
    compile_expression,
    compile_template,
    evaluate,
    render,
)


@dataclass(frozen=True, slots=True)
class _Located:
    source: str
    path: JsonPath
    span: SourceSpan
    document: LoadedDocument

    def fail(
        self, exc: TemplateRenderError, suggestor: str | None, cycle: int | None
    ) -> TemplateRunError:
        return TemplateRunError(
            f"template failed: {exc.message}",
            span=self.document.template_span(self.path, exc.lineno),
            suggestor=suggestor,
            cycle=cycle,
            hint=exc.hint,
        )


_DELIMITERS = ("{{", "{%", "{#")


def _literal(source: str, template: jinja2.Template) -> str | None:
    """The fixed text of a template with no Jinja syntax (rendered once, here), else None."""
    if any(mark in source for mark in _DELIMITERS):
        return None
    try:
        return render(template, dict(GLOBALS))
    except TemplateRenderError:
        return None


@dataclass(frozen=True, slots=True)
class CompiledTemplate(_Located):
    template: jinja2.Template
    # The output of a template without any Jinja syntax: rendering it is a no-op.
    literal: str | None = None

    @classmethod
    def of(cls, source: str, document: LoadedDocument, path: JsonPath) -> CompiledTemplate:
        template = compile_template(source)
        return cls(
            source,
            tuple(path),
            document.source_map.span(path),
            document,
            template,
            _literal(source, template),
        )

    def render(
        self, scope: dict[str, Any], *, suggestor: str | None = None, cycle: int | None = None
    ) -> str:
        if self.literal is not None:
            return self.literal
        try:
            return render(self.template, scope)
        except TemplateRenderError as exc:
            raise self.fail(exc, suggestor, cycle) from None


@dataclass(frozen=True, slots=True)
class CompiledExpression(_Located):
    expression: Callable[..., Any]

    @classmethod
    def of(cls, source: str, document: LoadedDocument, path: JsonPath) -> CompiledExpression:
        return cls(
            source,
            tuple(path),
            document.source_map.span(path),
            document,
            compile_expression(source),
        )

    def evaluate(
        self, scope: dict[str, Any], *, suggestor: str | None = None, cycle: int | None = None
    ) -> Any:
        try:
            return evaluate(self.expression, scope)
        except TemplateRenderError as exc:
            raise self.fail(exc, suggestor, cycle) from None

    def evaluate_data(
        self,
        scope: dict[str, Any],
        *,
        what: str,
        suggestor: str | None = None,
        cycle: int | None = None,
    ) -> Any:
        """Evaluate to a JSON value; `what` names the field in the error (`emit[0].data`)."""
        value = self.evaluate(scope, suggestor=suggestor, cycle=cycle)
        try:
            return as_json_data(value)
        except TemplateRenderError as exc:
            raise TemplateRunError(
                f"{what} is not a JSON value: {exc.message}",
                span=self.span,
                suggestor=suggestor,
                cycle=cycle,
                hint=exc.hint,
            ) from None
