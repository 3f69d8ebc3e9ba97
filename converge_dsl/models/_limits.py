"""Caps on what a provider may send (docs/architecture.md §8).

`ModelLimits` holds the per-model caps, each a field of the pipeline's
`models.<name>.limits` mapping (defaults in `DEFAULT_LIMITS`):
- `max_response_bytes`: the decoded body of an answer, whole or streamed in all;
- `max_error_bytes`: the decoded body of a non-200 answer (read up to the cap,
  the rest dropped: only its first words are quoted);
- `max_sse_line_bytes`: one line of a server-sent event stream;
- `max_sse_event_bytes`: the data of one server-sent event, all its lines together.
Sizes are counted after `Content-Encoding` is undone, as the bytes arrive, so a
compression bomb stops at the cap. Crossing a cap is `E_LIMIT`, never retried
(the same request would get the same answer), naming the cap and the field that
raises it. JSON in an answer nests at most `MAX_JSON_DEPTH` levels, checked
before it is decoded: deeper is `E_WIRE`, never a `RecursionError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from itertools import accumulate
from typing import NoReturn

from converge_dsl.models.port import ModelError, ModelErrorCode

KIB = 1024
MIB = 1024 * KIB
MIN_LIMIT = KIB
MAX_LIMIT = 1024 * MIB
MAX_JSON_DEPTH = 128
"""The deepest nesting of JSON arrays and objects an answer may have."""


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """Byte caps on one model's answers (see the module doc)."""

    max_response_bytes: int = 16 * MIB
    max_error_bytes: int = 64 * KIB
    max_sse_line_bytes: int = 1 * MIB
    max_sse_event_bytes: int = 4 * MIB


DEFAULT_LIMITS = ModelLimits()
LIMIT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ModelLimits))


def limits_problem(raw: object) -> tuple[str, str] | None:
    """`(field, problem)` for the first bad entry of a `limits` mapping, or None.

    `field` is "" when `raw` is not a mapping at all."""
    if not isinstance(raw, Mapping):
        return "", "`limits` must be a mapping of caps in bytes"
    for key, value in raw.items():
        if key not in LIMIT_FIELDS:
            return str(key), f"unknown limit {key!r} (known: {', '.join(LIMIT_FIELDS)})"
        if type(value) is not int or not MIN_LIMIT <= value <= MAX_LIMIT:
            return str(key), (
                f"`limits.{key}` must be a whole number of bytes from {MIN_LIMIT} "
                f"to {MAX_LIMIT}, not {value!r}"
            )
    return None


def limits_from(raw: Mapping[str, int] | None) -> ModelLimits:
    """The limits a checked `limits` mapping sets (the defaults for the rest)."""
    return ModelLimits(**dict(raw or {}))


def exceed(field: str, cap: int, what: str, model: str = "") -> NoReturn:
    """Raise the `E_LIMIT` error for `what` crossing the cap `field` (= `cap` bytes)."""
    where = f"models.{model}.limits.{field}" if model else f"limits.{field}"
    raise ModelError(
        ModelErrorCode.LIMIT,
        f"{what} is larger than {field} ({cap} bytes); the answer was discarded",
        hint=f"raise {where} if such answers are expected",
    )


_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deep the arrays and objects of JSON `text` nest (0 for a scalar).

    Strings are skipped first, so brackets inside them do not count. Runs in C
    regex passes plus one step per bracket, and never recurses."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)
