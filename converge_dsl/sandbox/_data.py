"""Data in the sandbox: the `fromjson` filter and the JSON check of expression values.

Both are bounded like everything in the sandbox (`converge_dsl.sandbox._limits`):
`fromjson` refuses text over `MAX_SIZE` before parsing and charges what it reads
and builds; `json_data` estimates the JSON text size of a value with a walk that
stops early before converting it, so shared references cannot make it unbounded
(a value of the plain JSON types alone is sized and converted in one walk that
stops at the same bound: 118 -> 23 us for a rule's data of six objects).
A value that is not what it must be raises `BadValue`, which `templating`
reports with its message and hint.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from types import GeneratorType
from typing import Any

import jinja2
import jinja2.exceptions

from converge_dsl._json_text import loads
from converge_dsl.sandbox._limits import MAX_SIZE, Limit, produce, spend, text_size


class BadValue(jinja2.exceptions.TemplateRuntimeError):
    """A value a template or expression produced or read is not what it must be.

    Not a bound (no `Limit`): `templating` reports its message as is, with `hint`.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def fromjson(text: Any) -> Any:
    """The `fromjson` filter: parse JSON text, bounded by `MAX_SIZE` before parsing."""
    if not isinstance(text, str):
        raise BadValue(
            f"fromjson expects JSON text, got {_kind(text)}",
            "the value is already data: use it without fromjson",
        )
    if len(text) > MAX_SIZE:
        raise Limit(f"JSON text of more than {MAX_SIZE} characters is refused")
    spend(0, len(text))
    try:
        value = loads(text)
    except ValueError as exc:
        raise BadValue(f"fromjson: the text is not JSON: {exc}") from None
    return produce(value)


def _kind(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, jinja2.Undefined):
        return "an undefined value"
    if isinstance(value, GeneratorType | Iterator):
        return "a lazy sequence"
    name = type(value).__name__
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


_DATA_HINTS = {
    "a lazy sequence": "add '| list' to turn it into a list",
    "a Fact": "a fact is not data; read one of its fields, e.g. fact.data",
    "a ProposedFact": "a proposal is not data; read one of its fields, e.g. p.data",
}


def json_data(value: Any) -> Any:
    """`value` as a JSON value (objects with text keys, arrays, text, numbers, booleans, null).

    Tuples become lists; mappings become dicts. Raises `BadValue` naming the JSON
    pointer of the first offending part, or `Limit` when its JSON text would pass
    `MAX_SIZE` (checked first, with a walk that stops early, so shared references
    cannot make the conversion unbounded).
    """
    try:
        return _plain(value, [MAX_SIZE])
    except (_NotPlain, RecursionError):
        pass  # the walk below decides, and words the refusal
    if text_size(value, MAX_SIZE) > MAX_SIZE:
        raise Limit(f"data of more than {MAX_SIZE} characters as JSON is refused")
    return _convert(value, "")


class _NotPlain(Exception):
    """A value `_plain` leaves to `json_data`'s checks and their messages."""


def _plain(value: Any, left: list[int]) -> Any:
    """`_convert` of a value of the plain JSON types alone, in one walk that takes from
    `left[0]` what `text_size` would count (what an expression's data nearly always
    is: no pointer is named, so none is built); `_NotPlain` for anything else, or once
    past that bound. `tests/sandbox/test_data.py` holds it to the two walks."""
    kind, out = type(value), value
    if kind is str:
        left[0] -= 2 + len(value)
    elif kind is int or kind is bool:
        left[0] -= 2 + value.bit_length() * 3 // 10
    elif value is None or (kind is float and math.isfinite(value)):
        left[0] -= 26  # a node, and what `text_size` counts for any other scalar
    elif kind is list or kind is tuple:
        left[0] -= 2
        out = [_plain(item, left) for item in value]
    elif isinstance(value, dict):
        left[0] -= 2
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            left[0] -= 2 + len(key)
            out[key] = _plain(item, left)
    else:
        raise _NotPlain
    if left[0] < 0:
        raise _NotPlain
    return out


def _convert(value: Any, pointer: str) -> Any:
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return _refuse(f"the number {value}", pointer, "JSON numbers are finite")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                return _refuse(f"the key {key!r}", pointer, "JSON object keys are text")
            out[key] = _convert(item, f"{pointer}/{_escape(key)}")
        return out
    if isinstance(value, list | tuple):
        return [_convert(item, f"{pointer}/{index}") for index, item in enumerate(value)]
    if isinstance(value, jinja2.Undefined):  # say why it is undefined
        try:
            value._fail_with_undefined_error()
        except (jinja2.UndefinedError, jinja2.exceptions.SecurityError) as exc:
            raise BadValue(f"{pointer or '/'} is undefined: {exc.message}") from None
    kind = _kind(value)
    return _refuse(kind, pointer, _DATA_HINTS.get(kind))


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _refuse(what: str, pointer: str, hint: str | None = None) -> Any:
    """Refuse the value: `what` it holds at the JSON `pointer` (the root is `/`)."""
    raise BadValue(f"{what} at {pointer or '/'}", hint)
