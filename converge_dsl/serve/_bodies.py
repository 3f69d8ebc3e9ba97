"""A request's body, read and decoded once for every route that takes one (the HTTP
API's POSTs and the MCP endpoint's messages).

`read_body(request, cap)` reads at most `cap` bytes (413, CD989, past it,
whether or not the request declared its length) within `BODY_S` seconds
(408, CD308: a slow body holds one of the server's bounded connections), refuses a body that says it
is compressed, is a media type other than JSON or declares a charset other than UTF-8
(415, CD307: it would be read as UTF-8 all the same), and answers a
client that went away before its body ended with `Refused` (400) rather than
the framework's exception. `parse_json(raw)` is the body's JSON value, or a
400 (CD983) whose `pointer` names the value at fault where there is one:

- the text is not UTF-8, or not JSON (the decoder's reason, its line and column);
- it nests deeper than `MAX_DEPTH`;
- it holds what a run could not carry: an object with one key twice (refused
  as `--input` refuses it: `converge_dsl._json_keys`), a number that is not
  finite once read (`1e999`) or an integer of more digits than Python reads,
  a lone surrogate, `NaN` or `Infinity`.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import sys
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._json_keys import Duplicated, keep_duplicates, unique_keys
from converge_dsl._json_pointer import pointer
from converge_dsl._json_text import loads
from converge_dsl._json_types import nests_deeper

from ._requests import Refused, one_header, refused

if TYPE_CHECKING:
    from starlette.requests import Request

MAX_DEPTH = 64
# How long a body may take to arrive, from its first read: a client trickling one byte at
# a time would hold a connection (of the server's bounded number) as long as it liked.
BODY_S = 30.0
# Content types a body is read as JSON under: JSON's own, and those clients send by
# default with a raw body (`curl -d`, a browser's `fetch` of a string, a byte stream).
_LENIENT_TYPES = frozenset(
    ("", "application/x-www-form-urlencoded", "text/plain", "application/octet-stream")
)
# A number whose value overflows a float: a 3-digit exponent, or 309 digits or more.
_MAY_OVERFLOW = re.compile(r"\d[eE][+-]?\d{3}|\d{309}", re.ASCII)  # in the decoded text
_SEND_JSON = "send a JSON object with Content-Type: application/json"
# The `charset` a JSON body may declare: JSON on the wire is UTF-8 (RFC 8259 §8.1), of
# which US-ASCII is a part.
_UTF8 = frozenset(("utf-8", "utf8", "us-ascii"))


async def read_body(
    request: Request, cap: int, seconds: float = BODY_S, *, lenient: bool = True
) -> bytes:
    """The raw body (see the module docstring): at most `cap` bytes, uncompressed JSON,
    all of it within `seconds` of the first read (408 else). `lenient=False` takes a
    body sent as `application/json` only (the MCP SDK reads no other)."""
    from starlette.requests import ClientDisconnect

    _check_media(request, lenient)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise too_large(cap)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > cap:
                    raise too_large(cap)
                chunks.append(chunk)
    except TimeoutError:
        raise refused(
            408,
            codes.SERVE_BODY_TIMEOUT,
            f"the request body did not arrive within {seconds:g} seconds",
            "",
            "send the whole body at once",
        ) from None
    except ClientDisconnect:
        raise refused(
            400,
            codes.SERVE_BAD_BODY,
            "the client closed the connection before the request body ended",
            "",
            "send the whole body (its Content-Length, or every chunk and the last one)",
        ) from None
    return b"".join(chunks)


def _check_media(request: Request, lenient: bool) -> None:
    encoding = one_header(request.headers, "Content-Encoding", codes.SERVE_BAD_PARAMETER)
    encoding = (encoding or "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise refused(
            415,
            codes.SERVE_UNSUPPORTED_MEDIA,
            f"the request body is encoded as {encoding[:40]!r}; only an uncompressed body is read",
            "",
            "send the body uncompressed, without a Content-Encoding header",
        )
    given = one_header(request.headers, "Content-Type", codes.SERVE_BAD_PARAMETER) or ""
    media = given.split(";", 1)[0].strip().lower()
    if not (
        media == "application/json"
        or (lenient and (media in _LENIENT_TYPES or media.endswith("+json")))
    ):
        raise refused(
            415,
            codes.SERVE_UNSUPPORTED_MEDIA,
            f"the request body is {media[:80]!r}; only JSON is read",
            "",
            _SEND_JSON,
        )
    charset = _charset(given) if media == "application/json" or media.endswith("+json") else ""
    if charset and charset.lower() not in _UTF8:  # an empty one is none
        raise refused(
            415,
            codes.SERVE_UNSUPPORTED_MEDIA,
            f"the request body is declared {charset[:40]!r} text (Content-Type charset); "
            "JSON is read as UTF-8 only (RFC 8259)",
            "",
            "encode the body as UTF-8 and send Content-Type: application/json, with no "
            "charset or charset=utf-8",
        )


def _charset(content_type: str) -> str:
    """The `charset` parameter of `content_type`, its quoted strings read as such (a
    `;` or `charset=` inside one is no parameter); "" when it has none."""
    if "=" not in content_type:  # no parameter with a value: most bodies, no parse
        return ""
    from email.message import Message
    from email.utils import collapse_rfc2231_value

    header = Message()
    header["content-type"] = content_type
    value = header.get_param("charset")
    return "" if value is None else collapse_rfc2231_value(value).strip()


def too_large(cap: int) -> Refused:
    return refused(
        413,
        codes.SERVE_BODY_TOO_LARGE,
        f"the request body is over {cap} bytes",
        "",
        "send less, or start the server with a larger --body-cap",
    )


def parse_json(raw: bytes) -> Any:
    """The JSON value of a body, or `Refused` (400; see the module docstring)."""
    try:
        text = raw.decode(json.detect_encoding(raw))
    except UnicodeDecodeError as exc:
        raise _not_json(
            f"the request body is not UTF-8 text: byte 0x{exc.object[exc.start]:02x} at "
            f"offset {exc.start} cannot be decoded"
        ) from None
    try:
        value = loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        raise _not_json(
            f"the request body is not JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}"
        ) from None
    except ValueError:
        raise _uncarriable(text) from None
    if nests_deeper(value, text, MAX_DEPTH):
        raise _too_deep()
    if _MAY_OVERFLOW.search(text) is not None:  # UTF-16 bodies too
        found = _first_problem(value)
        if found is not None:
            raise _located(*found)
    return value


class _LongInteger:
    """An integer of more digits than Python reads, kept to be located."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits.lstrip("-"))


def _read_int(digits: str) -> int | _LongInteger:
    most = sys.get_int_max_str_digits()  # Python reads no integer longer (0: any)
    return _LongInteger(digits) if most and len(digits.lstrip("-")) > most else int(digits)


def _uncarriable(text: str) -> Refused:
    """The located refusal of JSON text `loads` refused for a value it holds."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=keep_duplicates,
            parse_int=_read_int,
            parse_constant=lambda name: float("nan"),
        )
    except (ValueError, RecursionError):  # pragma: no cover (`loads` read its syntax)
        return _not_json("the request body is not JSON")
    found = _first_problem(value)
    if found is None:  # pragma: no cover (`loads` refused a value this finds)
        return _not_json("the request body holds a value that is not standard JSON")
    return _located(*found)


def _first_problem(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """The place and the reason of the first value (in document order) a run cannot carry."""
    from converge_dsl._json_text import surrogate_problem

    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, Duplicated) and item.key:
            return (*path, item.key), "the key is given twice in one object"
        if isinstance(item, dict):
            for key in item:
                if surrogate_problem(key) is not None:  # the object's place: no pointer is text
                    return (
                        path,
                        f"the key {key!r} holds a lone surrogate, which is not Unicode text",
                    )
            stack.extend(reversed([((*path, k), v) for k, v in item.items()]))
        elif isinstance(item, list):
            stack.extend(reversed([((*path, i), v) for i, v in enumerate(item)]))
        elif isinstance(item, _LongInteger):
            most = sys.get_int_max_str_digits()
            return path, f"the integer has {item.digits} digits, more than the {most} read"
        elif isinstance(item, float) and not math.isfinite(item):
            return path, "the number is not finite (NaN, Infinity, or too large for a float)"
        elif isinstance(item, str) and surrogate_problem(item) is not None:
            return path, "the text holds a lone surrogate, which is not Unicode text"
    return None


def _located(path: tuple[str | int, ...], reason: str) -> Refused:
    where = pointer(path)
    return refused(
        400,
        codes.SERVE_BAD_BODY,
        f"the request body holds a value that cannot be carried at {where or '/'}: {reason}",
        where,
        "send each key once, finite numbers that fit a 64-bit float or integer, and Unicode text",
    )


def _not_json(message: str) -> Refused:
    return refused(400, codes.SERVE_BAD_BODY, message, "", _SEND_JSON)


def _too_deep() -> Refused:
    return refused(
        400,
        codes.SERVE_BAD_BODY,
        f"the request body nests deeper than {MAX_DEPTH} levels",
        "",
        f"flatten the value to at most {MAX_DEPTH} levels of arrays and objects",
    )
