"""The one sandboxed Jinja environment for templates and expressions.

Templates (prompts, emitted content, ids) and expressions (`when`, `check`)
are compiled here, once, in a `jinja2.sandbox.ImmutableSandboxedEnvironment`
with `StrictUndefined`, autoescape off and a small explicit allowlist of
filters and globals. Nothing of Python is reachable: no `range` beyond a
bound, no `lipsum`, `cycler`, `joiner` or `namespace`. `generated(source)`
parses and code-generates once (`converge_dsl.sandbox._codegen`), giving the
code and the names read; `from_code` makes the template of such code (the
compiler's table of sources and its on-disk cache use the two).

Rendering is bounded as well as sandboxed (`render`, `evaluate`; the bounds
and their checks live in `converge_dsl.sandbox._limits`, re-exported here), because a
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
- bytes count like strings; repeating or concatenating a list counts its
  nested size (`[[1] * 1000] * 1000` is a million items); comparisons, `in`
  and tests charge the nested size of what they compare, so shared
  references cannot make one comparison unbounded;
- the output is cut off (an error, never a silently short text) past `MAX_OUTPUT`;
- string methods that pad, format or translate (`ljust`, `format`, `format_map`,
  ...) are refused, `%` formatting of text or bytes too;
- steps, work and the run's deadline are the one governor's
  (`converge_dsl.sandbox._governor`): a render past the deadline stops with a refusal.
A violation raises `TemplateRenderError` (no location: the caller, which knows
the template's span, the suggestor and the cycle, adds it).

Compilation errors are raised as `TemplateCompileError` with the line *within
the template*; callers map that line onto the YAML file through the source
map (block scalars start one line after their key).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from types import CodeType, FunctionType
from typing import Any, NamedTuple

import jinja2
import jinja2.exceptions
import jinja2.nodes
import jinja2.sandbox
from jinja2.environment import TemplateExpression
from jinja2.nodes import EvalContext

from converge_dsl._escapes import quoted
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.errors import ConvergeError
from converge_dsl.sandbox._codegen import BoundedCodeGenerator, Generated, generate, parse
from converge_dsl.sandbox._data import BadValue, fromjson, json_data
from converge_dsl.sandbox._governor import BUDGET, Budget, Exhausted, charge_deep
from converge_dsl.sandbox._limits import (
    FILTER_CHECKS,
    MAX_EXPONENT,
    MAX_INT_BITS,
    MAX_INT_DIGITS,
    MAX_OUTPUT,
    MAX_RANGE,
    MAX_SIZE,
    MAX_STEPS,
    MAX_WORK,
    OUTPUT_EXCEEDED,
    REFUSED_METHODS,
    Limit,
    bounded_compare,
    bounded_concat,
    bounded_range,
    bounded_sum,
    check_binop,
    check_join,
    check_replace,
    counted,
    finalize,
    guard_filter,
    guard_test,
    produce,
    spend,
)
from converge_dsl.sandbox._names import ALLOWED_FILTERS

__all__ = [
    "GLOBALS",
    "MAX_EXPONENT",
    "MAX_INT_BITS",
    "MAX_INT_DIGITS",
    "MAX_OUTPUT",
    "MAX_RANGE",
    "MAX_SIZE",
    "MAX_STEPS",
    "MAX_WORK",
    "NAMES_HINT",
    "TemplateCompileError",
    "TemplateRenderError",
    "as_json_data",
    "code_error",
    "compile_expression",
    "compile_template",
    "environment",
    "evaluate",
    "from_code",
    "generated",
    "register_record",
    "render",
    "undeclared_names",
]


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


NAMES_HINT = "templates see facts, proposals, count, has, fact, data_of, cycle, inputs"
_LIMIT_HINT = (
    "templates run under fixed bounds (steps, sizes, integer width) so that no pipeline "
    "can hang or exhaust memory; make this template do less work"
)
_FIELD_HINT = "a fact's structured data is fact.data, its text fact.content"
_REFUSED_HINT = "the sandbox exposes data and the context API only, nothing of Python"


class _Template(jinja2.Template):
    # What every render's context of this template may share (`_render_chunks`), made
    # once by `from_code`: its evaluation context and its globals' names; None when its
    # code changes its evaluation context (`{% autoescape %}`) or it has blocks.
    sandbox_shared: tuple[EvalContext, set[str]] | None = None


class _Context(jinja2.runtime.Context):
    """Jinja's context of one render, with the evaluation context and the globals' names
    of its template (`_Template.sandbox_shared`) instead of new ones: what Jinja's
    `__init__` makes, less its copies (`bench/render.py`)."""

    def __init__(  # Jinja's order of fields
        self,
        environment: jinja2.Environment,
        parent: dict[str, Any],
        name: str | None,
        eval_ctx: EvalContext,
        globals_keys: set[str],
    ) -> None:
        self.parent = parent
        self.vars = {}
        self.environment = environment
        self.eval_ctx = eval_ctx
        self.exported_vars = set()
        self.name = name
        self.globals_keys = globals_keys  # read only, by Jinja's `TemplateModule`
        self.blocks = {}


class _Environment(jinja2.sandbox.ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "+", "-", "%"})
    code_generator_class = BoundedCodeGenerator
    template_class = _Template

    bounded_compare = staticmethod(bounded_compare)
    bounded_concat = staticmethod(bounded_concat)
    counted = staticmethod(counted)

    def wrap_str_format(self, value: Any) -> None:
        """No `str.format`/`format_map`: the attribute rules refuse them like any padding."""

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return attr not in REFUSED_METHODS and super().is_safe_attribute(obj, attr, value)

    def call_binop(
        self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any
    ) -> Any:
        spend()
        check_binop(operator, left, right)
        return produce(self.binop_table[operator](left, right))

    def getattr(self, obj: Any, attribute: str) -> Any:
        spend()
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES and attribute in obj:
            # Jinja's rules: no such attribute of a dict, so its item (`bench/render.py`).
            return obj[attribute]
        if attribute in _SAFE_FIELDS.get(type(obj), ()):
            return getattr(obj, attribute)
        plain = _MAPPING_ATTRIBUTES.get(type(obj))
        if (
            plain is not None
            and attribute not in plain[0]
            and attribute in obj
            and not (plain[1] and attribute in obj.__dict__)  # nor its own: its item, as a dict's
        ):
            return obj[attribute]
        if attribute in _HIDDEN_SLOTS.get(type(obj), ()):
            return _named_field(obj, attribute, self.undefined(obj=obj, name=attribute))
        return _named_field(obj, attribute, super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        spend()
        if type(obj) in _PLAIN_INDEX:
            try:  # what Jinja's rules try first, with no side effect if it fails
                return obj[argument]
            except (TypeError, LookupError):
                if isinstance(argument, str) and argument in _HIDDEN_SLOTS.get(type(obj), ()):
                    return _named_field(obj, argument, self.undefined(obj=obj, name=argument))
        elif isinstance(argument, str) and argument in _SAFE_FIELDS.get(type(obj), ()):
            return getattr(obj, argument)
        return _named_field(obj, argument, super().getitem(obj, argument))

    def call_test(
        self, name: str, value: Any, args: Any = None, kwargs: Any = None, *rest: Any
    ) -> Any:
        """Jinja's `call_test` (`select`, `reject` call it per item), without its
        bookkeeping for a test that takes no context or keyword (all but two), and
        charged as its guard (`guard_test`) charges it."""
        test = _PLAIN_TESTS.get(name)
        if test is None or kwargs or self.tests.get(name) is not test.guarded:
            return super().call_test(name, value, args, kwargs, *rest)
        if args:  # a test with an argument is a comparison
            charge_deep(value, args[0])
        else:
            spend()
        return test.func(value, *(args or ()))

    def call(
        __self, __context: jinja2.runtime.Context, __obj: Any, *args: Any, **kwargs: Any
    ) -> Any:
        spend()
        if type(__obj) is FunctionType and not kwargs and not __obj.__dict__:
            # A plain function with no attributes (the scope's helpers): nothing marks it
            # unsafe or asks for the context, so Jinja's checks below would call it as is.
            try:
                value = __obj(*args)
            except StopIteration:
                value = __context.environment.undefined(_STOPPED)
            return produce(value)
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str | bytes) and args:  # str methods that can grow text
            name = getattr(__obj, "__name__", "")
            if name == "join":
                args = (check_join(args[0], owner), *args[1:])
            elif name == "replace":
                check_replace(owner, *args)
        return produce(super().call(__context, __obj, *args, **kwargs))


class _PlainTest(NamedTuple):
    """A test that takes no context, environment or evaluation context: Jinja's
    function, and its guard in the environment (while it is there, `call_test`
    charges and calls the function itself)."""

    func: Any
    guarded: Any


_PLAIN_TESTS: dict[str, _PlainTest] = {}
# Jinja's own words for a call that raised StopIteration (`Context.call`).
_STOPPED = "value was undefined because a callable raised a StopIteration exception"


# Record types (facts, proposals, data objects) whose readable fields are named
# when a template reads one they lack: {type: (noun, fields or None = its keys)}.
# Filled by the layers that own the types (`register_record`), since this
# module may not import them.
_RECORDS: dict[type, tuple[str, tuple[str, ...] | None]] = {}
_MAX_LISTED = 20
# The fields of such a record (one without `__getitem__`) the sandbox's attribute rules
# let a template read: its rules depend only on the type and the name, so once one read
# passed them the next reads go straight to the attribute, as Jinja's checks (an index
# that fails, then the attribute and its rules) would end anyway. The sandbox's own
# figure: `bench/batch.py` (CPU per case).
_SAFE_FIELDS: dict[type, set[str]] = {}
# A plain dict has no attribute but these: any other name Jinja's rules read of one is
# its item, or undefined.
_DICT_ATTRIBUTES = frozenset(dir(dict))
# Types whose `obj[x]` is the built-in lookup: pure, so trying it before Jinja's rules
# (which try it first too) changes nothing. Mappings of `register_record` join them.
_PLAIN_INDEX: set[type] = {dict, list, tuple, str}
# The attributes of such a mapping type (a dict subclass) whose attributes are looked up
# plainly: any other name Jinja's rules read of one of its objects is its item (when it
# has it and the object has no attribute of that name), else what the rules say.
# With each, whether its objects have a `__dict__` of their own (no `__slots__`).
_MAPPING_ATTRIBUTES: dict[type, tuple[frozenset[str], bool]] = {}
# The private slots of such a mapping type (a frozen object's kept JSON text): never an
# attribute to a template, so what a template reads does not depend on whether one is
# filled yet (Jinja would refuse a filled one as unsafe, and find an empty one missing).
_HIDDEN_SLOTS: dict[type, frozenset[str]] = {}


def _slots(cls: type) -> tuple[str, ...]:
    """The names `cls` itself declares in `__slots__` (which may be one string)."""
    slots = vars(cls).get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


def register_record(cls: type, noun: str, fields: tuple[str, ...] | None = None) -> None:
    """Name the fields when a template reads a missing attribute of a `cls` object.

    E.g. `register_record(Fact, "fact", FACT_FIELDS)`: `fact.contnet` then fails
    with "a fact has no field 'contnet' (did you mean 'content'?); fields: id,
    key, ..." instead of naming the Python class. `fields=None`: a mapping whose
    keys are its fields (frozen JSON objects).
    """
    _RECORDS[cls] = (noun, None if fields is None else tuple(fields))
    if fields is None and _plain_dict(cls):
        _PLAIN_INDEX.add(cls)
        hidden = frozenset(name for base in cls.__mro__ for name in _slots(base) if name)
        if hidden:
            _HIDDEN_SLOTS[cls] = hidden
        if _plain_attributes(cls):
            names = frozenset(dir(cls))
            _MAPPING_ATTRIBUTES[cls] = (names - hidden, "__dict__" in names)
    if fields is not None and not hasattr(cls, "__getitem__"):
        _SAFE_FIELDS[cls] = set()


def _plain_dict(cls: type) -> bool:
    """Whether indexing a `cls` object is the built-in dict lookup."""
    return (
        issubclass(cls, dict)
        and cls.__getitem__ is dict.__getitem__
        and not hasattr(cls, "__missing__")
    )


def _plain_attributes(cls: type) -> bool:
    """Whether a `cls` object's attributes are those of `dir(cls)` and its own `__dict__`
    (when it has one)."""
    return (
        type(cls) is type
        and cls is not dict
        and getattr(cls, "__getattribute__") is dict.__getattribute__  # noqa: B009
        and not hasattr(cls, "__getattr__")
    )


def _named_field(obj: Any, name: Any, value: Any) -> Any:
    if not isinstance(value, jinja2.Undefined):
        safe = _SAFE_FIELDS.get(type(obj))
        if safe is not None and name in _RECORDS[type(obj)][1]:  # type: ignore[operator]
            safe.add(name)  # passed the rules: a field of a record without `__getitem__`
        return value
    record = _RECORDS.get(type(obj))
    if record is None:
        return value
    noun, fields = record
    names = fields if fields is not None else tuple(sorted(map(str, obj)))
    guess = did_you_mean(str(name), names)
    listed = ", ".join(names[:_MAX_LISTED]) + (", ..." if len(names) > _MAX_LISTED else "")
    message = f"{noun} has no field {quoted(str(name))}"
    if guess is not None:
        message += f" ({suggestion(guess)})"
    message += f"; fields: {listed or 'none'}"
    return environment().undefined(hint=message, obj=obj, name=str(name))


@lru_cache(maxsize=1)
def environment() -> jinja2.sandbox.ImmutableSandboxedEnvironment:
    """The shared environment (created once per process)."""
    env = _Environment(
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        auto_reload=False,
        cache_size=0,
        finalize=finalize,
    )
    env.filters = {
        name: guard_filter(name, bounded_sum if name == "sum" else func, FILTER_CHECKS.get(name))
        for name, func in env.filters.items()
        if name in ALLOWED_FILTERS
    }
    env.filters["fromjson"] = fromjson
    tests = env.tests
    env.tests = {name: guard_test(name, test) for name, test in tests.items()}  # type: ignore[arg-type]
    _PLAIN_TESTS.update(
        (name, _PlainTest(test, env.tests[name]))
        for name, test in tests.items()
        if not hasattr(test, "jinja_pass_arg")
    )
    env.globals = dict(GLOBALS)
    return env


GLOBALS: Mapping[str, Any] = {"range": bounded_range}


def _translate(exc: jinja2.TemplateSyntaxError) -> TemplateCompileError:
    return TemplateCompileError(exc.message or "template syntax error", exc.lineno)


def generated(source: str, *, expression: bool = False) -> Generated:
    """Parse and generate a template (or expression) once: its code and the names it reads.

    Raises `TemplateCompileError` when it does not parse; a refusal of the code
    generator (an unknown filter, ...) is `Generated.error` (see `code_error`).
    """
    env = environment()
    try:
        return generate(env, parse(env, source, expression=expression))
    except jinja2.TemplateSyntaxError as exc:
        raise _translate(exc) from None


def code_error(result: Generated) -> TemplateCompileError | None:
    """The generator's refusal of a `Generated`, as a `TemplateCompileError`."""
    return None if result.error is None else _translate(result.error)


def from_code(code: CodeType, *, expression: bool = False) -> Any:
    """The template (or expression callable) of code from `generated`."""
    env = environment()
    # A plain dict of the globals, not Jinja's ChainMap over the environment's: each
    # render copies the globals' names into a set, which a ChainMap makes slowly.
    template = env.template_class.from_code(env, code, dict(env.make_globals(None)), None)
    if isinstance(template, _Template) and not template.blocks and not _sets_eval_context(code):
        template.sandbox_shared = (EvalContext(env, template.name), set(template.globals))
    return TemplateExpression(template, False) if expression else template


# The names of the evaluation context's fields: generated code that names one may change
# it (`{% autoescape %}` does; a macro's call reads it), so each render gets its own.
_EVAL_CONTEXT_FIELDS = frozenset({"autoescape", "volatile", "save", "revert"})


def _sets_eval_context(code: CodeType) -> bool:
    """Whether `code`, or a function inside it, may change the evaluation context."""
    if not _EVAL_CONTEXT_FIELDS.isdisjoint(code.co_names):
        return True
    return any(isinstance(c, CodeType) and _sets_eval_context(c) for c in code.co_consts)


def _compiled(source: str, expression: bool) -> Any:
    result = generated(source, expression=expression)
    error = code_error(result)
    if error is not None or result.code is None:
        raise error or TemplateCompileError("template does not compile", None)
    return from_code(result.code, expression=expression)


def compile_template(source: str) -> jinja2.Template:
    """Compile a template (uncached: the compiler caches); raises `TemplateCompileError`."""
    template: jinja2.Template = _compiled(source, False)
    return template


@lru_cache(maxsize=1024)
def compile_expression(source: str) -> Callable[..., Any]:
    """Compile an expression (`count('x') > 2`); raises `TemplateCompileError`.

    Cached: a compiled expression holds no state, and callers evaluate the same
    checks again and again.
    """
    expression: Callable[..., Any] = _compiled(source, True)
    return expression


def undeclared_names(source: str, *, expression: bool = False) -> frozenset[str]:
    """Free names a template (or expression) reads; raises `TemplateCompileError`."""
    return generated(source, expression=expression).names


def _undefined_hint(message: str) -> str | None:
    if message.startswith(("a fact ", "a proposal ")):
        return _FIELD_HINT
    return None if " has no field " in message else NAMES_HINT


def _render_error(exc: Exception) -> TemplateRenderError:
    lineno = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost frame of compiled template code gives the line
        template = tb.tb_frame.f_globals.get("__jinja_template__")
        if template is not None:
            lineno = template.get_corresponding_lineno(tb.tb_lineno)
        tb = tb.tb_next
    hint: str | None = None
    if isinstance(exc, BadValue):
        return TemplateRenderError(exc.message or str(exc), lineno, exc.hint)
    if isinstance(exc, Exhausted):
        return TemplateRenderError(exc.message, lineno, exc.hint or _LIMIT_HINT)
    if isinstance(exc, jinja2.UndefinedError | jinja2.exceptions.SecurityError):
        message = exc.message or str(exc)
        if isinstance(exc, Limit):
            hint = _LIMIT_HINT
        elif isinstance(exc, jinja2.UndefinedError):
            hint = _undefined_hint(message)
        else:
            hint = _REFUSED_HINT
    else:
        message = f"{type(exc).__name__}: {exc}"
    return TemplateRenderError(message, lineno, hint)


def _run(template: jinja2.Template, scope: dict[str, Any]) -> tuple[jinja2.runtime.Context, str]:
    """Render with `scope` as the shared parent (no copy); bounded; translated errors.

    The render's budget is opened as `governed(MAX_STEPS, MAX_WORK)` opens it (or the
    one already open is joined), without its object: every render pays for it
    (`bench/batch.py`, CPU per case; `tests/sandbox/test_templating.py` holds the two
    alike)."""
    token = None if BUDGET.get() is not None else BUDGET.set(Budget(MAX_STEPS, MAX_WORK))
    try:
        return _render_chunks(template, scope)
    except (RecursionError, MemoryError) as exc:
        raise TemplateRenderError(
            f"template is too deep or too large ({type(exc).__name__})"
        ) from None
    except Exception as exc:  # any error inside sandboxed code is the template's fault
        raise _render_error(exc) from None
    finally:
        if token is not None:
            BUDGET.reset(token)


def _render_chunks(
    template: jinja2.Template, scope: dict[str, Any]
) -> tuple[jinja2.runtime.Context, str]:
    # What `template.new_context(scope, shared=True)` makes, made directly.
    env = template.environment
    shared = getattr(template, "sandbox_shared", None)  # None: not from `from_code`
    if shared is None:
        context = env.context_class(env, scope, template.name, template.blocks, template.globals)
    else:
        context = _Context(env, scope, template.name, *shared)
    size = 0
    chunks: list[str] = []
    for chunk in template.root_render_func(context):
        size += len(chunk)
        if size > MAX_OUTPUT:
            raise Limit(OUTPUT_EXCEEDED)
        chunks.append(chunk)
    return context, "".join(chunks)


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
        try:  # an unsafe attribute's undefined value raises SecurityError
            result._fail_with_undefined_error()
        except (jinja2.UndefinedError, jinja2.exceptions.SecurityError) as exc:
            error = _render_error(exc)
            raise TemplateRenderError(error.message or "undefined value", 1, error.hint) from None
    return result


def as_json_data(value: Any) -> Any:
    """A value an expression gave, as JSON data (see `_data.json_data`).

    Raises `TemplateRenderError` (no line: the caller locates it) naming the JSON
    pointer of the first part that is not JSON, or the size bound it passes.
    """
    try:
        return json_data(value)
    except BadValue as exc:
        raise TemplateRenderError(exc.message or "not a JSON value", None, exc.hint) from None
    except Limit as exc:
        raise TemplateRenderError(exc.message or str(exc), None, _LIMIT_HINT) from None
    except RecursionError:
        raise TemplateRenderError("data is nested too deeply") from None
