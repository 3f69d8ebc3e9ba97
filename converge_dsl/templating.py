"""The one sandboxed Jinja environment for templates and expressions.

Templates (prompts, emitted content, ids) and expressions (`when`, `check`)
are compiled here, once, in a `jinja2.sandbox.ImmutableSandboxedEnvironment`
with `StrictUndefined`, autoescape off and a small explicit allowlist of
filters and globals. Nothing of Python is reachable: no `range` beyond a
bound, no `lipsum`, `cycler`, `joiner` or `namespace`.

Rendering is bounded as well as sandboxed (`render`, `evaluate`):
- every render has a step budget (`MAX_STEPS` attribute lookups, calls and
  `range` items), so nested loops cannot spin for minutes;
- `*`, `**`, `%` and `+` are intercepted, and `~` concatenation, `replace`,
  `indent`, `batch` and `slice` are checked, so no intermediate string or list
  grows past `MAX_SIZE`;
- the output is cut off (an error, never a silently short text) past `MAX_OUTPUT`;
- string methods that pad or format (`ljust`, `center`, `format`, ...) are refused.
A violation raises `TemplateRenderError` (no location: the caller, which knows
the template's span, the suggestor and the cycle, adds it).

Compilation errors are raised as `TemplateCompileError` with the line *within
the template*; callers map that line onto the YAML file through the source
map (block scalars start one line after their key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.exceptions
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox

from converge_dsl.errors import ConvergeError
from converge_dsl.template_names import ALLOWED_FILTERS

MAX_RANGE = 10_000
MAX_STEPS = 200_000
MAX_SIZE = 1_000_000
MAX_OUTPUT = 1_000_000
MAX_EXPONENT = 1_000

_REFUSED_METHODS = frozenset(
    {"ljust", "rjust", "center", "zfill", "expandtabs", "format", "format_map", "mro"}
)


class TemplateCompileError(ConvergeError):
    """A template or expression does not compile. `lineno` is 1-based within the template."""

    def __init__(self, message: str, lineno: int | None) -> None:
        super().__init__(message)
        self.lineno = lineno


class TemplateRenderError(ConvergeError):
    """A template or expression failed while rendering. `lineno` is within the template."""

    def __init__(self, message: str, lineno: int | None = None) -> None:
        super().__init__(message)
        self.lineno = lineno


class _Limit(jinja2.exceptions.SecurityError):
    """A render bound was crossed (raised inside Jinja, translated by `render`)."""


class _Budget:
    __slots__ = ("steps",)

    def __init__(self) -> None:
        self.steps = MAX_STEPS

    def spend(self, amount: int = 1) -> None:
        self.steps -= amount
        if self.steps < 0:
            raise _Limit(f"template exceeded its budget of {MAX_STEPS} steps")


_BUDGET: ContextVar[_Budget] = ContextVar("converge_dsl_template_budget")


def _spend(amount: int = 1) -> None:
    budget = _BUDGET.get(None)
    if budget is not None:
        budget.spend(amount)


def _check_size(value: Any) -> Any:
    if isinstance(value, str | list | tuple) and len(value) > MAX_SIZE:
        raise _Limit(f"a value of more than {MAX_SIZE} items or characters is refused")
    return value


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | list | tuple) else 0


def _bounded_range(*args: int) -> Iterator[int]:
    values = range(*args)
    if len(values) > MAX_RANGE:
        raise _Limit(f"range() of more than {MAX_RANGE} items is refused")
    _spend(len(values))
    return iter(values)


def _bounded_concat(parts: Iterable[Any]) -> str:
    text = "".join(str(p) for p in parts)
    return str(_check_size(text))


def _check_binop(op: str, left: Any, right: Any) -> None:
    if op == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(times, int) and _size(seq) * max(times, 0) > MAX_SIZE:
                raise _Limit(f"repetition past {MAX_SIZE} items or characters is refused")
    elif op == "**":
        if isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
            raise _Limit(f"an exponent above {MAX_EXPONENT} is refused")
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and abs(left).bit_length() * right > 64 * MAX_EXPONENT
        ):
            raise _Limit("a power this large is refused")
    elif op == "+":
        if _size(left) + _size(right) > MAX_SIZE:
            raise _Limit(f"a value of more than {MAX_SIZE} items or characters is refused")
    elif op == "%" and isinstance(left, str):
        raise _Limit("'%' string formatting is refused; use filters instead")


class _BoundedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Routes `~` concatenation through a size check."""

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Environment(jinja2.sandbox.ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "+", "%"})
    code_generator_class = _BoundedCodeGenerator

    @staticmethod
    def bounded_concat(parts: Iterable[Any]) -> str:
        return _bounded_concat(parts)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if attr in _REFUSED_METHODS:
            return False
        return super().is_safe_attribute(obj, attr, value)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        _spend()
        _check_binop(operator, left, right)
        return self.binop_table[operator](left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        _spend()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        _spend()
        return super().getitem(obj, argument)

    def call(
        __self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any
    ) -> Any:
        _spend()
        return _check_size(super().call(__context, __obj, *args, **kwargs))


def _guard_filter(
    name: str, check: Callable[..., None], inner: Callable[..., Any]
) -> Callable[..., Any]:
    def guarded(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        return _check_size(inner(*args, **kwargs))

    guarded.__name__ = name
    return guarded


def _check_replace(s: Any, old: Any, new: Any, count: Any = None, *_: Any) -> None:
    text = str(s)
    grow = max(len(str(new)) - len(str(old)), 0)
    hits = text.count(str(old)) if str(old) else len(text) + 1
    if len(text) + hits * grow > MAX_SIZE:
        raise _Limit(f"replace() would exceed {MAX_SIZE} characters")


def _check_indent(s: Any, width: Any = 4, *_: Any, **__: Any) -> None:
    if not isinstance(width, int):
        width = len(str(width))
    if (str(s).count("\n") + 1) * max(width, 0) + len(str(s)) > MAX_SIZE:
        raise _Limit(f"indent() would exceed {MAX_SIZE} characters")


def _check_count_arg(value: Any, n: Any = 1, *_: Any, **__: Any) -> None:
    if isinstance(n, int) and abs(n) > MAX_RANGE:
        raise _Limit(f"a size argument above {MAX_RANGE} is refused")


_FILTER_CHECKS: dict[str, Callable[..., None]] = {
    "replace": _check_replace,
    "indent": _check_indent,
    "batch": _check_count_arg,
    "slice": _check_count_arg,
}


@lru_cache(maxsize=1)
def environment() -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    """The shared environment (created once per process)."""
    env = _Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        auto_reload=False,
        cache_size=0,
    )
    filters: dict[str, Any] = {}
    for name, func in env.filters.items():
        if name not in ALLOWED_FILTERS:
            continue
        check = _FILTER_CHECKS.get(name)
        filters[name] = func if check is None else _guard_filter(name, check, func)
        # keep Jinja's pass_context/pass_environment markers on wrapped filters
        if check is not None and hasattr(func, "jinja_pass_arg"):
            filters[name].jinja_pass_arg = func.jinja_pass_arg
    env.filters = filters
    env.tests = dict(env.tests.items())
    env.globals = dict(GLOBALS)
    return env


GLOBALS: Mapping[str, Any] = {"range": _bounded_range}


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
    return frozenset(jinja2.meta.find_undeclared_variables(ast)) - set(GLOBALS)


def _render_error(exc: Exception) -> TemplateRenderError:
    lineno = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost frame of compiled template code gives the line
        template = tb.tb_frame.f_globals.get("__jinja_template__")
        if template is not None:
            lineno = template.get_corresponding_lineno(tb.tb_lineno)
        tb = tb.tb_next
    if isinstance(exc, jinja2.UndefinedError | jinja2.exceptions.SecurityError):
        message = exc.message or str(exc)
    else:
        message = f"{type(exc).__name__}: {exc}"
    return TemplateRenderError(message, lineno)


def _run(template: jinja2.Template, scope: dict[str, Any]) -> tuple[jinja2.runtime.Context, str]:
    """Render with `scope` as the shared parent (no copy); bounded; translated errors."""
    token = _BUDGET.set(_Budget())
    try:
        context = template.new_context(scope, shared=True)
        size = 0
        chunks: list[str] = []
        for chunk in template.root_render_func(context):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise _Limit(f"template output exceeded {MAX_OUTPUT} characters")
            chunks.append(chunk)
        return context, "".join(chunks)
    except (RecursionError, MemoryError) as exc:
        raise TemplateRenderError(
            f"template is too deep or too large ({type(exc).__name__})"
        ) from None
    except Exception as exc:  # any error inside sandboxed code is the template's fault
        raise _render_error(exc) from None
    finally:
        _BUDGET.reset(token)


def render(template: jinja2.Template, scope: dict[str, Any]) -> str:
    """Render `template` over `scope` (which must include `GLOBALS`).

    Raises `TemplateRenderError`.
    """
    return _run(template, scope)[1]


def evaluate(expression: Callable[..., Any], scope: dict[str, Any]) -> Any:
    """Evaluate an expression from `compile_expression`; raises `TemplateRenderError`."""
    template: jinja2.Template = expression._template  # type: ignore[attr-defined]
    context, _ = _run(template, scope)
    result = context.vars["result"]
    if isinstance(result, jinja2.Undefined):
        try:
            result._fail_with_undefined_error()
        except jinja2.UndefinedError as exc:
            raise TemplateRenderError(exc.message or "undefined value", 1) from None
    return result
