"""The one sandboxed Jinja environment for templates and expressions.

Templates (prompts, emitted content, ids) and expressions (`when`, `check`)
are compiled here, once, in a `jinja2.sandbox.ImmutableSandboxedEnvironment`
with `StrictUndefined`, autoescape off and a small explicit allowlist of
filters and globals. Nothing of Python is reachable: no `range` beyond a
bound, no `lipsum`, `cycler`, `joiner` or `namespace`.

Rendering is bounded as well as sandboxed (`render`, `evaluate`), because a
CPU-bound render cannot be preempted (the run's wall-clock budget is checked
between cycles only), so every operation checks its result size *before*
building it:
- a step budget (`MAX_STEPS` attribute lookups, calls and `range` items);
- integers: `*`, `**`, `+`, `-` on ints are refused when the result could pass
  `MAX_INT_BITS` bits (printable: under Python's 4,300-digit limit), `int` of a
  string of more than `MAX_INT_DIGITS` digits is refused;
- strings and lists: no value a binop, filter, call or `~` builds passes
  `MAX_SIZE`; what turns a value into text (`{{ }}`, `~`, `join`, `tojson`,
  `string`, `upper`, ...) first estimates the text size with a walk that stops
  early (`_text_size`), since a short list can hold 3,000 references to a
  1 MB string; `sum` joins lists in linear time within `MAX_SIZE`;
- work: the sizes of all values built (and scanned by filters) in one render
  count against `MAX_WORK`, so loops cannot build or scan big values forever;
- the output is cut off (an error, never a silently short text) past `MAX_OUTPUT`;
- string methods that pad, format or translate (`ljust`, `format`, ...) are refused.
A violation raises `TemplateRenderError` (no location: the caller, which knows
the template's span, the suggestor and the cycle, adds it).

Compilation errors are raised as `TemplateCompileError` with the line *within
the template*; callers map that line onto the YAML file through the source
map (block scalars start one line after their key).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from itertools import chain, repeat
from types import GeneratorType
from typing import Any

import jinja2
import jinja2.compiler
import jinja2.exceptions
import jinja2.meta
import jinja2.nodes
import jinja2.sandbox
from jinja2.filters import make_attrgetter

from converge_dsl.errors import ConvergeError
from converge_dsl.template_names import ALLOWED_FILTERS

MAX_RANGE = 10_000
MAX_STEPS = 200_000
MAX_SIZE = 1_000_000
MAX_OUTPUT = 1_000_000
MAX_EXPONENT = 1_000
# Every integer a template builds fits in this many bits (about 3,850 decimal
# digits): under Python's 4,300-digit int<->str limit, so every int prints.
MAX_INT_BITS = 12_800
MAX_INT_DIGITS = MAX_INT_BITS * 3 // 10
# Per render, the total size (characters or items) of the values operators,
# filters, calls, `~` and `{{ }}` build, plus the sizes of the values filters
# walk: bounds memory, and loops that build or scan big values over and over.
MAX_WORK = 10 * MAX_SIZE

_REFUSED_METHODS = frozenset(
    "ljust rjust center zfill expandtabs format format_map mro translate maketrans to_bytes".split()  # noqa: SIM905
)
_END = object()
_OUTPUT_EXCEEDED = f"template output exceeded {MAX_OUTPUT} characters"


class TemplateCompileError(ConvergeError):
    """A template or expression does not compile. `lineno` is 1-based within the template."""

    def __init__(self, message: str, lineno: int | None) -> None:
        super().__init__(message)
        self.lineno = lineno


class TemplateRenderError(ConvergeError):
    """A template or expression failed while rendering. `lineno` is within the template."""

    def __init__(self, message: str, lineno: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.lineno = lineno


_NAMES_HINT = "templates see facts, proposals, count, has, fact, cycle, inputs"
_LIMIT_HINT = (
    "templates run under fixed bounds (steps, sizes, integer width) so that no pipeline "
    "can hang or exhaust memory; make this template do less work"
)
_REFUSED_HINT = "the sandbox exposes data and the context API only, nothing of Python"


class _Limit(jinja2.exceptions.SecurityError):
    """A render bound was crossed (raised inside Jinja, translated by `render`)."""


class _Budget:
    __slots__ = ("steps", "work")

    def __init__(self) -> None:
        self.steps = MAX_STEPS
        self.work = MAX_WORK


_BUDGET: ContextVar[_Budget] = ContextVar("converge_dsl_template_budget")


def _spend(steps: int = 1, size: int = 0) -> None:
    """Count steps and built or scanned size against the current render's budget."""
    budget = _BUDGET.get(None)
    if budget is not None:
        budget.steps -= steps
        budget.work -= size
        if budget.steps < 0:
            raise _Limit(f"template exceeded its budget of {MAX_STEPS} steps")
        if budget.work < 0:
            raise _Limit(f"template built or scanned more than {MAX_WORK} characters or items")


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | list | tuple | dict) else 0


def _too_big(what: str = "a value") -> _Limit:
    return _Limit(f"{what} of more than {MAX_SIZE} items or characters is refused")


def _produce(value: Any) -> Any:
    """Check and charge a value an operation built; meter a generator item by item."""
    if isinstance(value, str | list | tuple | dict):
        if len(value) > MAX_SIZE:
            raise _too_big()
        _spend(0, len(value))
    elif isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise _Limit(f"an integer of more than {MAX_INT_BITS} bits is refused")
    elif isinstance(value, GeneratorType):  # a lazy filter: meter item by item
        return (_produce(item) for item in value)
    return value


def _text_size(value: Any, limit: int, indent: int = 0) -> int:
    """Estimate `len(str(value))` (or of its JSON), stopping once past `limit`.

    Walks containers and dataclasses without building text; a shared reference
    counts each time it would be printed. Every node costs at least one, so the
    walk is bounded by `limit` too. `indent` adds JSON indentation per level.
    """
    total = 0
    stack: list[tuple[Iterator[Any], int]] = [(iter((value,)), 0)]
    while stack:
        items, depth = stack[-1]
        item = next(items, _END)
        if item is _END:
            stack.pop()
            continue
        total += 2 + indent * depth
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, int):
            total += item.bit_length() * 3 // 10
        elif isinstance(item, jinja2.Undefined):
            total += 9
        elif isinstance(item, Mapping):
            stack.append((chain.from_iterable(item.items()), depth + 1))
        elif isinstance(item, Collection):
            stack.append((iter(item), depth + 1))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            fields = dataclasses.fields(item)
            total += len(type(item).__name__) + sum(len(f.name) for f in fields)
            stack.append(((getattr(item, f.name) for f in fields), depth + 1))
        else:
            total += 24
        if total > limit:
            break
    return total


def _as_text(value: Any, *_: Any, **__: Any) -> Any:
    """Refuse a value whose text (`str`, JSON) would pass `MAX_SIZE`, before building it."""
    if not isinstance(value, str) and _text_size(value, MAX_SIZE) > MAX_SIZE:
        raise _too_big("text")
    return value


def _finalize(value: Any) -> Any:
    size = len(value) if isinstance(value, str) else _text_size(value, MAX_OUTPUT)
    if size > MAX_OUTPUT:
        raise _Limit(_OUTPUT_EXCEEDED)
    _spend(0, size)
    return value


def _bounded_range(*args: int) -> Iterator[int]:
    values = range(*args)
    if len(values) > MAX_RANGE:
        raise _Limit(f"range() of more than {MAX_RANGE} items is refused")
    _spend(len(values))
    return iter(values)


def _bounded_concat(parts: tuple[Any, ...]) -> str:
    size = 0
    for part in parts:
        size += len(part) if isinstance(part, str) else _text_size(part, MAX_SIZE)
        if size > MAX_SIZE:
            raise _too_big()
    return str(_produce("".join(str(p) for p in parts)))


def _check_binop(op: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would pass a bound, before computing it."""
    if op == "**" and isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
        raise _Limit(f"an exponent above {MAX_EXPONENT} is refused")
    if op == "%":
        if isinstance(left, str):
            raise _Limit("'%' string formatting is refused; use filters instead")
    elif isinstance(left, int) and isinstance(right, int):
        if op == "**":
            bits = left.bit_length() * max(right, 0)
        elif op == "*":
            bits = left.bit_length() + right.bit_length()
        else:  # + and -
            bits = max(left.bit_length(), right.bit_length()) + 1
        if bits > MAX_INT_BITS:
            raise _Limit(f"an integer result of more than {MAX_INT_BITS} bits is refused")
    elif op == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(times, int) and _size(seq) * max(times, 0) > MAX_SIZE:
                raise _too_big("repetition")
    elif op == "+" and _size(left) + _size(right) > MAX_SIZE:
        raise _too_big()


def _check_join(items: Any, sep: Any = "", attribute: Any = None, *_: Any) -> Any:
    """Materialise the items of a join; refuse it if the text would pass `MAX_SIZE`."""
    seq = items if isinstance(items, str | list | tuple) else list(items)
    parts = seq if attribute is None else map(make_attrgetter(environment(), attribute), seq)
    step = len(sep) if isinstance(sep, str) else _text_size(sep, MAX_SIZE)
    size = 0
    if parts is seq and all(map(isinstance, seq, repeat(str))):  # fast path, in C
        parts, size = (), sum(map(len, seq)) + step * len(seq)
    for part in parts:
        size += step + (len(part) if isinstance(part, str) else _text_size(part, MAX_SIZE))
        if size > MAX_SIZE:
            break
    if size > MAX_SIZE:
        raise _too_big("join()")
    return seq


def _check_replace(s: Any, old: Any, new: Any, count: Any = None, *_: Any) -> Any:
    text = str(_as_text(s))
    grow = max(len(str(new)) - len(str(old)), 0)
    hits = text.count(str(old)) if str(old) else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    if len(text) + hits * grow > MAX_SIZE:
        raise _Limit(f"replace() would exceed {MAX_SIZE} characters")
    return s


def _check_indent(s: Any, width: Any = 4, *_: Any, **__: Any) -> Any:
    text = str(_as_text(s))
    if not isinstance(width, int):
        width = len(str(width))
    if (text.count("\n") + 1) * max(width, 0) + len(text) > MAX_SIZE:
        raise _Limit(f"indent() would exceed {MAX_SIZE} characters")
    return s


def _check_tojson(value: Any, indent: Any = None, *_: Any) -> Any:
    step = indent if isinstance(indent, int) and indent > 0 else 0
    if _text_size(value, MAX_SIZE, step) > MAX_SIZE:
        raise _too_big("JSON text")
    return value


def _check_int(value: Any, *_: Any, **__: Any) -> Any:
    if isinstance(value, str) and len(value.strip()) > MAX_INT_DIGITS:
        raise _Limit(f"int() of a number of more than {MAX_INT_DIGITS} digits is refused")
    return value


def _check_count_arg(value: Any, n: Any = 1, *_: Any, **__: Any) -> Any:
    if isinstance(n, int) and abs(n) > MAX_RANGE:
        raise _Limit(f"a size argument above {MAX_RANGE} is refused")
    return value


@jinja2.pass_environment
def _sum(
    env: jinja2.Environment, iterable: Iterable[Any], attribute: Any = None, start: Any = 0
) -> Any:
    """Jinja's `sum`, with lists and tuples joined in linear time within `MAX_SIZE`."""
    items = list(iterable)
    if attribute is not None:
        items = list(map(make_attrgetter(env, attribute), items))
    if not isinstance(start, list | tuple):
        return sum(items, start)
    if _size(start) + sum(_size(x) for x in items) > MAX_SIZE:
        raise _too_big("sum()")
    out = list(start)
    for item in items:
        if type(item) is not type(start):
            raise TypeError(f"sum() cannot add {type(item).__name__} to {type(start).__name__}")
        out.extend(item)
    return out if isinstance(start, list) else tuple(out)


def _guard_filter(name: str, func: Callable[..., Any], check: Callable[..., Any] | None) -> Any:
    """Wrap a filter: check its value first, charge what it walks and builds."""
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0

    def guarded(*args: Any, **kwargs: Any) -> Any:
        value = args[skip]
        _spend(0, _size(value))
        if check is not None:
            value = check(value, *args[skip + 1 :], **kwargs)
        return _produce(func(*args[:skip], value, *args[skip + 1 :], **kwargs))

    guarded.__name__ = name
    if skip:  # keep Jinja's pass_context/pass_environment marker
        guarded.jinja_pass_arg = func.jinja_pass_arg  # type: ignore[attr-defined]
    return guarded


_TEXT_FILTERS = ("string", "upper", "lower", "title", "capitalize", "trim", "wordcount", "truncate")
_FILTER_CHECKS: dict[str, Callable[..., Any]] = {
    **dict.fromkeys(_TEXT_FILTERS, _as_text),
    "join": _check_join,
    "replace": _check_replace,
    "indent": _check_indent,
    "tojson": _check_tojson,
    "int": _check_int,
    "batch": _check_count_arg,
    "slice": _check_count_arg,
}


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """Spend one step per loop iteration, so nested loops cannot run unbounded."""
    for item in iterable:
        _spend()
        yield item


class _BoundedCodeGenerator(jinja2.compiler.CodeGenerator):
    """Routes `~` concatenation through a size check and counts `for` iterations."""

    def visit_For(self, node: jinja2.nodes.For, frame: jinja2.compiler.Frame) -> None:
        node.iter = jinja2.nodes.Call(
            jinja2.nodes.EnvironmentAttribute("counted"), [node.iter], [], None, None
        )
        super().visit_For(node, frame)

    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        self.write("environment.bounded_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Environment(jinja2.sandbox.ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "+", "-", "%"})
    code_generator_class = _BoundedCodeGenerator

    bounded_concat = staticmethod(_bounded_concat)
    counted = staticmethod(_counted)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return attr not in _REFUSED_METHODS and super().is_safe_attribute(obj, attr, value)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        _spend()
        _check_binop(operator, left, right)
        return _produce(self.binop_table[operator](left, right))

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
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str | bytes) and args:  # str methods that can grow text
            name = getattr(__obj, "__name__", "")
            if name == "join":
                args = (_check_join(args[0], owner), *args[1:])
            elif name == "replace":
                _check_replace(owner, *args)
        return _produce(super().call(__context, __obj, *args, **kwargs))


@lru_cache(maxsize=1)
def environment() -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    """The shared environment (created once per process)."""
    env = _Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        auto_reload=False,
        cache_size=0,
        finalize=_finalize,
    )
    env.filters = {
        name: _guard_filter(name, _sum if name == "sum" else func, _FILTER_CHECKS.get(name))
        for name, func in env.filters.items()
        if name in ALLOWED_FILTERS
    }
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
    hint: str | None = None
    if isinstance(exc, jinja2.UndefinedError | jinja2.exceptions.SecurityError):
        message = exc.message or str(exc)
        if isinstance(exc, _Limit):
            hint = _LIMIT_HINT
        elif isinstance(exc, jinja2.UndefinedError):
            hint = _NAMES_HINT
        else:
            hint = _REFUSED_HINT
    else:
        message = f"{type(exc).__name__}: {exc}"
    return TemplateRenderError(message, lineno, hint)


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
                raise _Limit(_OUTPUT_EXCEEDED)
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
