"""Compiled templates and expressions that know where they came from.

A `CompiledTemplate` is compiled once (at compile time; one compilation per
distinct source text, shared, see `_sources`) and rendered many times over a
render scope (`_scope.RenderScopes`). A template without Jinja syntax is a
literal: rendering it returns its text. A render error becomes a
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
from converge_dsl.sandbox import TemplateRenderError, as_json_data, evaluate, render

from ._sources import SOURCES, Source


@dataclass(frozen=True, slots=True)
class _Located:
    source: str
    path: JsonPath
    document: LoadedDocument

    @property
    def span(self) -> SourceSpan:
        """Where the template is (looked up when asked: most templates never fail)."""
        return self.document.source_map.span(self.path)

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


@dataclass(frozen=True, slots=True)
class CompiledTemplate(_Located):
    # None for a literal (a template without Jinja syntax: its output is `literal`).
    template: jinja2.Template | None
    literal: str | None = None

    @classmethod
    def of(cls, source: str, document: LoadedDocument, path: JsonPath) -> CompiledTemplate:
        """Compile (once per distinct source, `_sources.SOURCES`); raises `TemplateCompileError`."""
        compiled = SOURCES.get(source)
        compiled.check()
        return cls.of_source(compiled, document, path)

    @classmethod
    def of_source(
        cls, source: Source, document: LoadedDocument, path: JsonPath
    ) -> CompiledTemplate:
        return cls(source.text, tuple(path), document, source.compiled, source.literal)

    def render(
        self, scope: dict[str, Any], *, suggestor: str | None = None, cycle: int | None = None
    ) -> str:
        if self.template is None:
            return self.literal or ""
        try:
            return render(self.template, scope)
        except TemplateRenderError as exc:
            raise self.fail(exc, suggestor, cycle) from None


@dataclass(frozen=True, slots=True)
class CompiledExpression(_Located):
    expression: Callable[..., Any]

    @classmethod
    def of(cls, source: str, document: LoadedDocument, path: JsonPath) -> CompiledExpression:
        """Compile (once per distinct source, `_sources.SOURCES`); raises `TemplateCompileError`."""
        compiled = SOURCES.get(source, expression=True)
        compiled.check()
        return cls.of_source(compiled, document, path)

    @classmethod
    def of_source(
        cls, source: Source, document: LoadedDocument, path: JsonPath
    ) -> CompiledExpression:
        return cls(source.text, tuple(path), document, source.compiled)

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
                f"{what} is not a JSON value: {exc.cited}",
                span=self.span,
                suggestor=suggestor,
                cycle=cycle,
                hint=exc.hint,
            ) from None
