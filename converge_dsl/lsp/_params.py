"""How a message's values are read: the params of a method by `strict_converter` (once
`params_misfit` found them the object the method takes), a request's id by `request_id`,
and a misfit said in words (`misfits`).

A JSON value of the wrong type for a string, integer, boolean or number field is a misfit
(cattrs would make `null` the text "None" and `1.5` the line 1); what the server sends is
written as pygls writes it.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from typing import Any, Optional, Union

import attrs
import cattrs
from cattrs.v import format_exception
from pygls.exceptions import JsonRpcException
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    default_converter,
)

# The JSON values each primitive field type takes, and their name: an integer is not a
# float, a bool or a string (a bool is an int in Python); a number may be an integer.
_JSON_TYPES: dict[type, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"),
    int: ((int,), "an integer"),
    bool: ((bool,), "true or false"),
    float: ((float, int), "a number"),
}


# A field in cattrs's place of a misfit, a Python name of more than one word.
_FIELD = re.compile(r"\.([a-z][a-z0-9]*(?:_[a-z0-9]+)+_?)(?=[.\[]|$)")


class WrongType(TypeError):
    """A JSON value of the wrong type for a field (its words are the misfit's)."""


def strict_converter() -> cattrs.Converter:
    """pygls's converter, reading each primitive field only from its own JSON type, and an
    integer-or-string field (a request's id in `$/cancelRequest`, a progress token) only from
    an integer or a string: lsprotocol took any value there, and an array or an object then
    failed inside pygls as unhashable, ending the session.

    A message of a method with no type of its own (a notification no handler takes, a
    response to no request of the server's: both dropped) keeps its params or result as
    the JSON they are. pygls made each JSON object in them a namedtuple of a class of its
    own, compiled for it: about 0.1 ms an object, so a 20 MB notification of small objects
    held the server 39 to 60 s before the next message."""
    converter: cattrs.Converter = default_converter()  # type: ignore[no-untyped-call]
    for kind, (accepted, name) in _JSON_TYPES.items():
        converter.register_structure_hook(kind, functools.partial(_exactly, accepted, name))
    for either in (Union[int, str], Optional[Union[int, str]]):  # noqa: UP007, UP045
        converter.register_structure_hook(either, _int_or_str)
    for untyped in (JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage):
        converter.register_structure_hook(untyped, _as_sent)
    return converter


def _as_sent(message: dict[str, object], kind: type[Any]) -> object:
    """A message of a method without a type of its own, its params or result as sent: null
    when left out (JSON-RPC lets a notification or a request leave its params out), and
    another member than the message type's (an `extra`) not read, as a typed message's."""
    return kind(**{field.name: message.get(field.name) for field in attrs.fields(kind)})


def _int_or_str(value: object, kind: object) -> int | str | None:
    """`value` as an integer or a string (an integral number written `1.0` is an integer);
    null as it is: the id of a request may be null (JSON-RPC 2.0), as it was read before."""
    found = request_id(value)
    if found is None or isinstance(found, int | str):
        return found
    raise WrongType(f"expected an integer or a string, not {shown(value)}")


def _exactly(accepted: tuple[type, ...], name: str, value: object, kind: type) -> object:
    """`value` as `kind` when it is one of the `accepted` JSON values. A type's hook is
    its subclasses' too: an enumeration of integers (a diagnostic's severity) is made
    from an integer as cattrs makes it, `kind(value)`. JSON has one number type: an
    integral number written with a fraction or an exponent (`1.0`, `1e2`) is an integer."""
    if isinstance(value, float) and accepted == (int,) and value.is_integer():
        value = int(value)
    if isinstance(value, accepted) and (bool in accepted or not isinstance(value, bool)):
        return kind(value)
    raise WrongType(f"expected {name}, not {shown(value)}")


NOT_AN_ID = object()


def request_id(value: object) -> object:
    """`value` as a request's id: a string, an integer (one written `1.0` too: JSON has one
    number type) or null; `NOT_AN_ID` for any other value (an array, an object, a bool, a
    number with a fraction), which JSON-RPC 2.0 does not allow."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, str) or type(value) is int:
        return value
    return NOT_AN_ID


def shown(value: object) -> str:
    """`value` as JSON, cut to 40 characters."""
    shown = json.dumps(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def misfits(exc: JsonRpcException) -> str:
    """What in the params does not fit, each at its place (cattrs's own words)."""
    cause = exc.__cause__
    if isinstance(cause, cattrs.ClassValidationError):
        return "; ".join(map(_placed, cattrs.transform_error(cause, "message", _misfit)))
    return "the params do not fit the method"


def _placed(misfit: str) -> str:
    """`misfit` placed by the names the protocol writes (cattrs wrote lsprotocol's fields'
    Python names: `params.text_document`, a field the client never sent)."""
    words, at, place = misfit.rpartition(" @ ")
    return words + at + _FIELD.sub(lambda field: "." + _json_name(field[1]), place)


def _misfit(exc: BaseException, expected: type | None) -> str:
    """cattrs's words for one misfit, but a value a field's own rule refuses (a negative
    line, a number past the protocol's range) in that rule's words, not "invalid value"."""
    if isinstance(exc, ValueError) and expected is None and str(exc):
        return _LONG_NUMBER.sub(_shortened, str(exc).removesuffix("."))
    if isinstance(exc, WrongType):
        return str(exc)
    if isinstance(expected, type) and issubclass(expected, enum.Enum):
        *most, last = (json.dumps(member.value) for member in expected)
        return f"expected {', '.join(most)} or {last} ({expected.__name__})"
    return format_exception(exc, expected)


_LONG_NUMBER = re.compile(r"[0-9]{21,}")


def _shortened(number: re.Match[str]) -> str:
    """A number past any range, cut: a rule's words echoed it whole."""
    return f"{number[0][:10]}... ({len(number[0])} digits)"


def params_misfit(kind: object, data: dict[str, object]) -> str | None:
    """Why the params of message `data` are not the object its method takes (`kind`, its
    message type): missing, null or another JSON value; None when they are an object (its
    fields are read by `strict_converter`) or the method takes no object. cattrs said
    "invalid value for type, expected Union @ message.params.id" of a cancel's null params:
    a type of its own, at a field never sent.

    Params left out (JSON-RPC allows it) of a method whose object has no required field
    (`initialized`) are that object empty: `data` gets `"params": {}`."""
    if not isinstance(kind, type) or not attrs.has(kind):
        return None
    field = attrs.fields_dict(kind).get("params")
    params = None if field is None else field.type
    if (
        not isinstance(params, type)
        or not attrs.has(params)
        or isinstance(data.get("params"), dict)
    ):
        return None
    names = [_json_name(a.name) for a in attrs.fields(params) if a.default is attrs.NOTHING]
    expected = "an object" + (f" with {' and '.join(map(repr, names))}" if names else "")
    if "params" not in data and not names:
        data["params"] = {}
        return None
    if "params" not in data:
        return f"missing, expected {expected} @ message.params"
    return f"expected {expected}, not {shown(data['params'])} @ message.params"


def _json_name(name: str) -> str:
    """A field's name as the protocol writes it (`text_document`: `textDocument`)."""
    first, *rest = name.rstrip("_").split("_")
    return first + "".join(word.capitalize() for word in rest)
