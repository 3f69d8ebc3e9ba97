"""The bounds a template render runs under (see `converge_dsl.sandbox._templating`).

A CPU-bound render cannot be preempted, so every operation checks its result
size *before* building it: a step budget, integer width, string, bytes and list
sizes, the text size of values turned into text (estimated by a walk that
stops early, `_text_size`), the nested size of what is repeated, concatenated
or compared (`deep_size`), the work of a whole render, the output size.
`templating` wires these checks into its sandboxed environment; a crossed
bound raises `Limit` (or the governor's `Exhausted`), which `templating`
translates into `TemplateRenderError`. Steps, work and the run's deadline are
counted by the one governor (`converge_dsl.sandbox._governor`), whose budget
`templating` opens around each render.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from itertools import chain, repeat
from types import GeneratorType
from typing import Any

import jinja2
import jinja2.exceptions
from jinja2.filters import make_attrgetter

from converge_dsl.sandbox._governor import charge_deep, deep_size, spend

__all__ = ["spend"]  # re-exported for the sandbox modules; the rest are used by name

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

REFUSED_METHODS = frozenset(
    "ljust rjust center zfill expandtabs format format_map mro translate maketrans to_bytes".split()  # noqa: SIM905
)
_END = object()
OUTPUT_EXCEEDED = f"template output exceeded {MAX_OUTPUT} characters"


class Limit(jinja2.exceptions.SecurityError):
    """A render bound was crossed (raised inside Jinja, translated by `render`)."""


_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset)
_TEXT = (str, bytes, bytearray)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, _SIZED) else 0


def _too_big(what: str = "a value") -> Limit:
    return Limit(f"{what} of more than {MAX_SIZE} items or characters is refused")


def produce(value: Any) -> Any:
    """Check and charge a value an operation built; meter a generator item by item."""
    if isinstance(value, _SIZED):
        if len(value) > MAX_SIZE:
            raise _too_big()
        spend(0, len(value))
    elif isinstance(value, int):
        if value.bit_length() > MAX_INT_BITS:
            raise Limit(f"an integer of more than {MAX_INT_BITS} bits is refused")
    elif isinstance(value, GeneratorType):  # a lazy filter: meter item by item
        return (produce(item) for item in value)
    return value


def _text_size(value: Any, limit: int, indent: int = 0) -> int:
    """Estimate `len(str(value))` (or of its JSON), stopping once past `limit`.

    Walks containers and dataclasses without building text; a shared reference
    counts each time it would be printed. Every node costs at least one, so the
    walk is bounded by `limit` too. `indent` adds JSON indentation per level.
    """
    if isinstance(value, str):  # what the walk below counts of a lone string or number
        return 2 + len(value)
    if type(value) is int:
        return 2 + value.bit_length() * 3 // 10
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
        elif item is None or isinstance(item, float):  # as below, before the slow checks
            total += 24
        elif isinstance(item, jinja2.Undefined):
            total += 9
        elif isinstance(item, dict | Mapping):  # dict first: in C, before the ABC's check
            stack.append((chain.from_iterable(item.items()), depth + 1))
        elif isinstance(item, list | tuple | Collection):
            stack.append((iter(item), depth + 1))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            fields = dataclasses.fields(item)
            total += len(type(item).__name__) + sum(len(f.name) for f in fields)
            stack.append((iter([getattr(item, f.name) for f in fields]), depth + 1))
        else:
            total += 24
        if total > limit:
            break
    return total


# The public name of the walk, for the sandbox's data helpers.
text_size = _text_size


def _as_text(value: Any, *_: Any, **__: Any) -> Any:
    """Refuse a value whose text (`str`, JSON) would pass `MAX_SIZE`, before building it."""
    if not isinstance(value, str) and _text_size(value, MAX_SIZE) > MAX_SIZE:
        raise _too_big("text")
    return value


def finalize(value: Any) -> Any:
    size = len(value) if isinstance(value, str) else _text_size(value, MAX_OUTPUT)
    if size > MAX_OUTPUT:
        raise Limit(OUTPUT_EXCEEDED)
    spend(0, size)
    return value


def bounded_range(*args: int) -> Iterator[int]:
    values = range(*args)
    if len(values) > MAX_RANGE:
        raise Limit(f"range() of more than {MAX_RANGE} items is refused")
    spend(len(values))
    return iter(values)


def bounded_concat(parts: tuple[Any, ...]) -> str:
    size = 0
    for part in parts:
        size += len(part) if isinstance(part, str) else _text_size(part, MAX_SIZE)
        if size > MAX_SIZE:
            raise _too_big()
    return str(produce("".join(str(p) for p in parts)))


def check_binop(op: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would pass a bound, before computing it."""
    if op == "**" and isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
        raise Limit(f"an exponent above {MAX_EXPONENT} is refused")
    if op == "%":
        if isinstance(left, _TEXT):
            raise Limit("'%' string formatting is refused; use filters instead")
    elif isinstance(left, int) and isinstance(right, int):
        if op == "**":
            bits = left.bit_length() * max(right, 0)
        elif op == "*":
            bits = left.bit_length() + right.bit_length()
        else:  # + and -
            bits = max(left.bit_length(), right.bit_length()) + 1
        if bits > MAX_INT_BITS:
            raise Limit(f"an integer result of more than {MAX_INT_BITS} bits is refused")
    elif op == "*":  # nested sizes count: [[1] * 1000] * 1000 is a million items
        for seq, times in ((left, right), (right, left)):
            if (
                isinstance(times, int)
                and isinstance(seq, _SIZED)
                and deep_size(seq, MAX_SIZE) * max(times, 0) > MAX_SIZE
            ):
                raise _too_big("repetition")
    elif (
        op == "+"
        and isinstance(left, _SIZED)
        and isinstance(right, _SIZED)
        and deep_size(left, MAX_SIZE) + deep_size(right, MAX_SIZE) > MAX_SIZE
    ):
        raise _too_big()


def check_join(
    items: Any, sep: Any = "", attribute: Any = None, *_: Any, environment: Any = None
) -> Any:
    """Materialise the items of a join; refuse it if the text would pass `MAX_SIZE`.

    `environment` is the sandbox whose attribute rules read `attribute` (the
    `join` filter passes its own; a `str.join` call has no attribute).
    """
    seq = items if isinstance(items, str | list | tuple) else list(items)
    parts = seq if attribute is None else map(make_attrgetter(environment, attribute), seq)
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


def check_replace(s: Any, old: Any, new: Any, count: Any = None, *_: Any) -> Any:
    text = str(_as_text(s))
    grow = max(len(str(new)) - len(str(old)), 0)
    hits = text.count(str(old)) if str(old) else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    if len(text) + hits * grow > MAX_SIZE:
        raise Limit(f"replace() would exceed {MAX_SIZE} characters")
    return s


def _check_indent(s: Any, width: Any = 4, *_: Any, **__: Any) -> Any:
    text = str(_as_text(s))
    if not isinstance(width, int):
        width = len(str(width))
    if (text.count("\n") + 1) * max(width, 0) + len(text) > MAX_SIZE:
        raise Limit(f"indent() would exceed {MAX_SIZE} characters")
    return s


def _check_tojson(value: Any, indent: Any = None, *_: Any) -> Any:
    step = indent if isinstance(indent, int) and indent > 0 else 0
    if _text_size(value, MAX_SIZE, step) > MAX_SIZE:
        raise _too_big("JSON text")
    return value


def _check_int(value: Any, *_: Any, **__: Any) -> Any:
    if isinstance(value, str) and len(value.strip()) > MAX_INT_DIGITS:
        raise Limit(f"int() of a number of more than {MAX_INT_DIGITS} digits is refused")
    return value


def _check_count_arg(value: Any, n: Any = 1, *_: Any, **__: Any) -> Any:
    if isinstance(n, int) and abs(n) > MAX_RANGE:
        raise Limit(f"a size argument above {MAX_RANGE} is refused")
    return value


@jinja2.pass_environment
def bounded_sum(
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


def _synchronous(func: Callable[..., Any]) -> tuple[Callable[..., Any], int]:
    """The filter Jinja's async-variant wrapper (`list`, `map`, `join`, ...) calls in a
    synchronous environment, as the sandbox's is, and the leading arguments it drops
    for it: the evaluation context, when that filter takes none (`bench/render.py`)."""
    if not getattr(func, "jinja_async_variant", False):
        return func, 0
    synchronous: Callable[..., Any] = func.__wrapped__  # type: ignore[attr-defined]
    return synchronous, 0 if hasattr(synchronous, "jinja_pass_arg") else 1


def guard_filter(name: str, func: Callable[..., Any], check: Callable[..., Any] | None) -> Any:
    """Wrap a filter: check its value first, charge what it walks and builds."""
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0
    call, drop = _synchronous(func)
    sorting = name in SORTING_FILTERS

    def guarded(*args: Any, **kwargs: Any) -> Any:
        value = args[skip]
        if sorting and isinstance(value, _SIZED):
            spend(0, deep_size(value, MAX_WORK) * max(1, len(value).bit_length()))
        else:
            spend(0, len(value) if isinstance(value, _SIZED) else 0)
        if check is None:
            return produce(call(*args[drop:], **kwargs))
        if check is check_join:  # reads attributes under the sandbox's rules
            value = check_join(value, *args[skip + 1 :], **kwargs, environment=args[0].environment)
        else:
            value = check(value, *args[skip + 1 :], **kwargs)
        return produce(call(*args[drop:skip], value, *args[skip + 1 :], **kwargs))

    guarded.__name__ = name
    if skip:  # keep Jinja's pass_context/pass_environment marker
        guarded.jinja_pass_arg = func.jinja_pass_arg  # type: ignore[attr-defined]
    return guarded


_TEXT_FILTERS = ("string", "upper", "lower", "title", "capitalize", "trim", "wordcount", "truncate")
FILTER_CHECKS: dict[str, Callable[..., Any]] = {
    **dict.fromkeys(_TEXT_FILTERS, _as_text),
    "join": check_join,
    "replace": check_replace,
    "indent": _check_indent,
    "tojson": _check_tojson,
    "int": _check_int,
    "batch": _check_count_arg,
    "slice": _check_count_arg,
}


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gteq": operator.ge,
    "lt": operator.lt,
    "lteq": operator.le,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
}


def bounded_compare(left: Any, *ops: tuple[str, Any]) -> Any:
    """A comparison chain (`a == b`, `x in xs`, `a < b < c`), each charged before it runs.

    Comparing walks nested values (`in` scans its container), so each one costs
    the deep size of the smaller side, counted with a walk that stops early:
    a list of shared references cannot make one comparison unbounded.
    """
    result: Any = True
    for op, right in ops:
        if op in ("in", "notin"):
            charge_deep(right)
        else:
            charge_deep(left, right)
        result = _COMPARE[op](left, right)
        if not result:
            return result
        left = right
    return result


# Filters that compare their items (sort, unique, ...): charged the deep size
# of the value times the log of its length before they run.
SORTING_FILTERS = frozenset({"sort", "unique", "min", "max", "dictsort", "groupby"})


def guard_test(name: str, func: Callable[..., Any]) -> Any:
    """Wrap a Jinja test (`eq`, `in`, ...): a test with an argument is a comparison."""
    skip = 1 if hasattr(func, "jinja_pass_arg") else 0

    def guarded(*args: Any, **kwargs: Any) -> Any:
        if len(args) > skip + 1:
            charge_deep(*args[skip : skip + 2])
        else:
            spend()
        return func(*args, **kwargs)

    guarded.__name__ = name
    if hasattr(func, "jinja_pass_arg"):
        guarded.jinja_pass_arg = func.jinja_pass_arg  # type: ignore[attr-defined]
    return guarded


def counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """Spend one step per loop iteration, so nested loops cannot run unbounded."""
    for item in iterable:
        spend()
        yield item
