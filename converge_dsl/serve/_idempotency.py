"""Idempotency keys of the service: what a usable key is (`checked_key`), what makes
two run requests the same, and the 409 answer (CD997) located at the first place
where a repeated key's request differs. The HTTP API takes a key from the
`Idempotency-Key` header, the MCP endpoint from a tool call's `_meta`; both
share one store of keys, so one rule holds for both.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from converge_dsl import codes
from converge_dsl._json_pointer import pointer
from converge_dsl._json_types import JsonObject

from ._requests import Problem, Refused
from ._store import RunRow, RunStore

# The longest idempotency key kept (characters).
MAX_IDEMPOTENCY_KEY = 255


@dataclass(frozen=True)
class IdempotencyKey:
    """A usable key (`checked_key`) and where it was given, as the refusals name it."""

    value: str
    where: str


def checked_key(key: object, code: str, where: str) -> IdempotencyKey:
    """`key` when it is 1 to `MAX_IDEMPOTENCY_KEY` printable ASCII characters; else
    `Refused` (400) with `code`, the message naming `where` the key was given and what
    is wrong with it."""
    if not isinstance(key, str):
        has = f"it is a JSON {_json_kind(key)}"
    elif not 0 < len(key) <= MAX_IDEMPOTENCY_KEY:
        has = f"it has {len(key)}"
    else:
        other = next((n for n, c in enumerate(key) if not " " <= c <= "~"), None)
        if other is None:
            return IdempotencyKey(key, where)
        has = f"its character {other + 1}, {key[other]!r}, is not printable ASCII"
    raise Refused(
        400,
        (
            Problem(
                code,
                f"{where} must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters ({has})",
                "",
                "send a short unique string per request, such as a UUID",
            ),
        ),
    )


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "array" if isinstance(value, list) else "object"


def request_digest(pipeline: str, request: JsonObject) -> str:
    """What makes two requests the same: the pipeline and the checked request."""
    text = json.dumps([pipeline, request], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def first_run(
    store: RunStore, key: IdempotencyKey, pipeline: str, request: JsonObject
) -> tuple[str, str | None]:
    """The digest of `request` and the run first queued with `key` when it was the same
    request (None when the key is new); `key_conflict` (409) when it was another."""
    digest = request_digest(pipeline, request)
    first = store.idempotent(key.value)
    if first is None:
        return digest, None
    if first[0] != digest:
        raise key_conflict(key, pipeline, request, store.get(first[1]))
    return digest, first[1]


def key_conflict(
    key: IdempotencyKey, pipeline: str, request: JsonObject, first: RunRow | None
) -> Refused:
    """409: `key` was first given with another request; located at the first difference,
    the message naming where the key was given (the header, or an MCP call's `_meta`)."""
    if first is not None and first.pipeline != pipeline:
        at, what = "", f"pipeline {first.pipeline!r}"
    else:
        at = _first_difference(first.request if first is not None else {}, request)
        what = "another request"
    return Refused(
        409,
        (
            Problem(
                codes.SERVE_IDEMPOTENCY_CONFLICT,
                f"{key.where} {key.value[:64]!r} was first used with {what}",
                at,
                "give a new key for a new request, or repeat the first request unchanged "
                "to get its run",
            ),
        ),
    )


def _first_difference(first: Any, second: Any, path: tuple[str, ...] = ()) -> str:
    """The JSON pointer of the first place where `second` differs from `first`."""
    if isinstance(first, dict) and isinstance(second, dict):
        for name in sorted({*first, *second}):
            if name not in first or name not in second or first[name] != second[name]:
                return _first_difference(first.get(name), second.get(name), (*path, name))
    return pointer(path)
