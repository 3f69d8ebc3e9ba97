"""What a YAML scalar means: its value, or the located problem the loader reports.

`read_scalar(tag, text, plain=..., explicit=...)` turns one scalar's resolved
tag and text into a JSON value, or into a `Problem` (code, message, hint) the
loader locates at the scalar. The rules (docs/architecture.md §4):

- Numbers are decimal and fit JSON: an integer fits in 64 bits (`MIN_INT` to
  `MAX_INT`), a float is finite and a non-zero text does not underflow to 0
  (`NUMBER_OUT_OF_RANGE`). Texts are never converted when over these sizes,
  so Python's integer-string limit is never reached.
- A plain scalar that YAML 1.1 and YAML 1.2 read differently is refused:
  `yes`/`no`/`on`/`off`/`y`/`n` (`YAML11_BOOLEAN`), octal, sexagesimal and `_`
  numbers, `0o10` and exponents without a dot (`1e3`) that PyYAML reads as
  text, and hexadecimal (`0x1F`, which JSON cannot write): `YAML11_NUMBER`.
  So is any other text PyYAML keeps as text and YAML 1.2 (ruamel.yaml's
  resolver) reads as a number: leading zeros with an 8 or 9 (`08`, `+019`),
  `_` where YAML 1.1 allows none (`0_9`), a signed `.5` (`+.5`).
- An explicit core tag (`!!null !!bool !!int !!float !!str`) must match its
  text under the YAML 1.2 core schema (`!!null 'x'` is refused, `TAG_MISMATCH`);
  `!!int` takes decimal integers only, like plain scalars.
- `text_lost(text, value)`: a float whose text a float cannot keep (`1.10`
  becomes 1.1, more digits than a double holds); the schema stage reports it
  where the value is free-form data (`NUMBER_TEXT_LOST`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from converge_dsl import codes
from converge_dsl._pyyaml import yaml
from converge_dsl._record import Record

TAG = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (TAG + t for t in ("str", "int", "float", "bool", "null"))
AS_TEXT = frozenset({TAG + "timestamp", TAG + "value"})  # YAML 1.2 reads these as strings
MIN_INT, MAX_INT = -(2**63), 2**63 - 1
_MAX_INT_DIGITS = len(str(MAX_INT))  # 19
_MAX_EXACT_TEXT = 400  # a longer float text is taken as losing digits without measuring

_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_NULL_TEXTS = frozenset({"", "~", "null", "Null", "NULL"})
_YAML11_BOOL_WORDS = frozenset({"y", "Y", "n", "N"})
_DECIMAL_INT = re.compile(r"[-+]?[0-9]+\Z")
_PLAIN_DECIMAL_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z")
_HEX_INT = re.compile(r"[-+]?0x[0-9a-fA-F]+\Z")
_CORE_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)\Z")
_NUMBER_START = frozenset("0123456789+-.")
# Plain texts PyYAML (YAML 1.1) reads as strings and the YAML 1.2 core schema as numbers.
_YAML12_ONLY_NUMBER = re.compile(r"[-+]?(?:0o[0-7]+|[0-9]+(?:\.[0-9]*)?[eE][-+]?[0-9]+)\Z")
# What ruamel.yaml (YAML 1.2, which comment-keeping edits of a file use) reads as a number:
# its resolver's int and float forms. A plain text PyYAML keeps as text and this matches
# (`08`, `019`, `+08`, `0_9`, `+.5`, `0o1_`) is a number to one and text to the other.
_YAML12_NUMBER = re.compile(
    r"""[-+]?(?:0b[01_]+|0o?[0-7_]+|[0-9_]+|0x[0-9a-fA-F_]+
    |[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[0-9][0-9_]*[eE][-+]?[0-9]+
    |\.[0-9_]+(?:[eE][-+][0-9]+)?)\Z""",
    re.X,
)
_DECIMAL_DIGITS = re.compile(r"[-+]?[0-9]{1,18}\Z")


class Problem(Record):
    """Why a scalar is refused: a stable code, a message and a hint."""

    _fields = ("code", "message", "hint")
    __slots__ = _fields

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        self.code = code
        self.message = message
        self.hint = hint


def read_scalar(tag: str, text: str, *, plain: bool, explicit: bool) -> Any:
    """The JSON value of a scalar, or a `Problem`.

    `plain`: written without quotes or block style; `explicit`: its tag was
    written (`!!int 5`) rather than resolved from plain text. Mapping keys
    follow the same rules as values.
    """
    if tag == STR:
        if plain and not explicit:
            return _plain_text(text)
        return text
    if tag in AS_TEXT:
        return text
    if explicit:
        return _tagged(tag, text)
    if tag == INT:
        return _implicit_int(text)
    if tag == FLOAT:
        if _CORE_FLOAT.match(text):
            return _float(text)
        return Problem(
            codes.YAML11_NUMBER,
            f"{text!r} is not a number JSON can hold",
            f"quote it if you mean text ('{text}'), or write a decimal",
        )
    if tag == BOOL:
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        return yaml11_boolean(text)
    if tag == NULL:
        return None
    return Problem(codes.FORBIDDEN_TAG, "", None)  # the loader words forbidden tags itself


def yaml11_boolean(text: str) -> Problem:
    return Problem(
        codes.YAML11_BOOLEAN,
        f"{text!r} is a boolean in YAML 1.1 and text in YAML 1.2",
        f"write true/false, or quote it: '{text}'",
    )


def _plain_text(text: str) -> Any:
    if text in _YAML11_BOOL_WORDS:
        return yaml11_boolean(text)
    if text[:1] in _NUMBER_START and _YAML12_ONLY_NUMBER.match(text):
        value: Any = "a number"
        if len(text) <= 24:
            value = int(text.replace("0o", ""), 8) if "0o" in text else _float(text)
        if isinstance(value, Problem):  # out of range in YAML 1.2 too
            return value
        shown = f" ({value})" if not isinstance(value, str) else ""
        return Problem(
            codes.YAML11_NUMBER,
            f"{text!r} is a number{shown} in YAML 1.2 and text in YAML 1.1",
            f"write it in decimal{shown} for the number, or quote it for text: '{text}'",
        )
    if text[:1] in _NUMBER_START and _YAML12_NUMBER.match(text) and _yaml11_text(text):
        number = str(int(text)) if _DECIMAL_DIGITS.match(text) else None
        return Problem(
            codes.YAML11_NUMBER,
            f"{text!r} is a number{f' ({number})' if number else ''} in YAML 1.2 and text "
            "in YAML 1.1",
            f"write {number or 'it in decimal'} for the number, or quote it for text: '{text}'",
        )
    return text


def _yaml11_text(text: str) -> bool:
    """Whether PyYAML reads plain `text` as text (a scalar tagged `!!str 5` comes here too)."""
    tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    return bool(tag == STR)


def _implicit_int(text: str) -> Any:
    if _PLAIN_DECIMAL_INT.match(text):
        return _int(text)
    if _HEX_INT.match(text):
        value = _int(str(int(text, 16))) if len(text) <= 20 else _too_big(text)
        shown = value if isinstance(value, int) else "a number"
        return Problem(
            codes.YAML11_NUMBER,
            f"{text!r} is a hexadecimal number ({shown}); numbers are written in decimal",
            f"write {shown} for the number, or quote it for text: '{text}'",
        )
    return Problem(
        codes.YAML11_NUMBER,
        f"{text!r} is read as a number in YAML 1.1 (octal, sexagesimal or with '_')",
        f"quote it if you mean text ('{text}'), or write a decimal",
    )


def _tagged(tag: str, text: str) -> Any:
    """The value of an explicitly tagged core scalar, checked against its text."""
    if tag == NULL and text in _NULL_TEXTS:
        return None
    if tag == BOOL and text in _TRUE | _FALSE:
        return text in _TRUE
    if tag == INT and _DECIMAL_INT.match(text):
        return _int(text)
    if tag == FLOAT and _CORE_FLOAT.match(text):
        return _float(text)
    if tag == FLOAT and _SPECIAL_FLOAT.match(text):
        return Problem(
            codes.NUMBER_OUT_OF_RANGE,
            f"{text!r} is not a number JSON can hold",
            "write a finite decimal number",
        )
    if tag not in (NULL, BOOL, INT, FLOAT):
        return Problem(codes.FORBIDDEN_TAG, "", None)
    name = tag.replace(TAG, "!!")
    wanted = {
        NULL: "null, ~ or nothing",
        BOOL: "true or false",
        INT: "a decimal integer",
        FLOAT: "a decimal number",
    }[tag]
    return Problem(
        codes.TAG_MISMATCH,
        f"tag {name} does not match the text {_short(text)}: {name} takes {wanted}",
        "remove the tag (quote the text if you mean text), or write a value of that type",
    )


def _int(text: str) -> Any:
    sign = "-" if text[:1] == "-" else ""
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > _MAX_INT_DIGITS:  # never hand int() a long text (its limit, its cost)
        return _too_big(text)
    value = int(sign + digits)
    if not MIN_INT <= value <= MAX_INT:
        return _too_big(text)
    return value


def _too_big(text: str) -> Problem:
    return Problem(
        codes.NUMBER_OUT_OF_RANGE,
        f"the integer {_short(text)} does not fit in 64 bits ({MIN_INT} to {MAX_INT})",
        "write a smaller number, or quote it if you mean text",
    )


def _float(text: str) -> Any:
    value = float(text)
    if math.isinf(value):
        return Problem(
            codes.NUMBER_OUT_OF_RANGE,
            f"the number {_short(text)} is too large for a 64-bit float (it would be infinity)",
            "write a smaller number, or quote it if you mean text",
        )
    if value == 0.0 and any(c in "123456789" for c in text.lower().partition("e")[0]):
        return Problem(
            codes.NUMBER_OUT_OF_RANGE,
            f"the number {_short(text)} is too small for a 64-bit float (it would be 0)",
            "write 0, or quote it if you mean text",
        )
    return value


def text_lost(text: str, value: float) -> bool:
    """True when the float `value` read from `text` cannot give `text` back.

    Lost: trailing zeros a float drops (`1.10` -> 1.1, `2.50`), and digits
    beyond a double's precision (`0.1000000000000000001`). Kept: `1.0`, `1e3`,
    `.5`, `+2.5`, whose value is exactly what the text says.
    """
    shortest = repr(value)
    if shortest == text:
        return False
    if len(text) > _MAX_EXACT_TEXT:
        return True
    from decimal import Decimal, InvalidOperation  # rarely needed: not on every start-up

    try:
        written, kept = Decimal(text), Decimal(shortest)
    except InvalidOperation:  # pragma: no cover - both texts are valid decimals
        return True
    exponent, kept_exponent = written.as_tuple().exponent, kept.as_tuple().exponent
    if not isinstance(exponent, int) or not isinstance(kept_exponent, int):  # pragma: no cover
        return True  # NaN or infinity: not a finite float's text
    return written != kept or exponent < kept_exponent


def _short(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:20] + "…" + text[-10:])
