"""The one sandboxed Jinja environment for templates and expressions.

Templates (prompts, emitted content, ids) and expressions (`when`, `check`)
are compiled here, once, in a `jinja2.sandbox.ImmutableSandboxedEnvironment`
with `StrictUndefined`, autoescape off and a small explicit allowlist of
filters and globals. Nothing of Python is reachable: no `range` beyond a
bound, no `lipsum`, `cycler`, `joiner` or `namespace`.

Compilation errors are raised as `TemplateCompileError` with the line *within
the template*; callers map that line onto the YAML file through the source
map (block scalars start one line after their key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.exceptions
import jinja2.meta
import jinja2.sandbox

from converge_dsl.errors import ConvergeError

MAX_RANGE = 10_000

ALLOWED_FILTERS: frozenset[str] = frozenset(
    {
        "abs", "capitalize", "count", "default", "d", "first", "float", "int", "join",
        "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr",
        "replace", "round", "select", "selectattr", "sort", "string", "sum", "title",
        "tojson", "trim", "truncate", "unique", "upper", "wordcount", "batch", "slice",
        "dictsort", "items", "indent",
    }
)

# Names every template and expression may use (the context API of DESIGN §2).
CONTEXT_NAMES: frozenset[str] = frozenset(
    {"facts", "proposals", "count", "has", "fact", "cycle", "inputs"}
)


class TemplateCompileError(ConvergeError):
    """A template or expression does not compile. `lineno` is 1-based within the template."""

    def __init__(self, message: str, lineno: int | None) -> None:
        super().__init__(message)
        self.lineno = lineno


def _bounded_range(*args: int) -> Iterator[int]:
    values = range(*args)
    if len(values) > MAX_RANGE:
        raise jinja2.exceptions.SecurityError(f"range() of more than {MAX_RANGE} items is refused")
    return iter(values)


@lru_cache(maxsize=1)
def environment() -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    """The shared environment (created once per process)."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        auto_reload=False,
        cache_size=0,
    )
    env.filters = {name: f for name, f in env.filters.items() if name in ALLOWED_FILTERS}
    env.globals = {"range": _bounded_range}
    return env


def _translate(exc: jinja2.TemplateSyntaxError) -> TemplateCompileError:
    return TemplateCompileError(exc.message or "template syntax error", exc.lineno)


def compile_template(source: str) -> jinja2.Template:
    """Compile a template once; raises `TemplateCompileError`."""
    try:
        return environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise _translate(exc) from None


def compile_expression(source: str) -> Callable[..., Any]:
    """Compile an expression (`count('x') > 2`); raises `TemplateCompileError`."""
    try:
        return environment().compile_expression(source, undefined_to_none=False)
    except jinja2.TemplateSyntaxError as exc:
        raise _translate(exc) from None


def undeclared_names(source: str, *, expression: bool = False) -> frozenset[str]:
    """Free names a template (or expression) reads; raises `TemplateCompileError`."""
    text = "{{ " + source + " }}" if expression else source
    try:
        ast = environment().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise _translate(exc) from None
    return frozenset(jinja2.meta.find_undeclared_variables(ast)) - {"range"}
