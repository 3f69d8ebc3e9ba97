"""Idempotency keys of the service: what makes two run requests the same, and the
409 answer (CD997) located at the first place where a repeated key's request differs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from converge_dsl import codes
from converge_dsl._json_pointer import pointer
from converge_dsl._json_types import JsonObject

from ._requests import Problem, Refused
from ._store import RunRow


def request_digest(pipeline: str, request: JsonObject) -> str:
    """What makes two requests the same: the pipeline and the checked request."""
    text = json.dumps([pipeline, request], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def key_conflict(key: str, pipeline: str, request: JsonObject, first: RunRow | None) -> Refused:
    """409: `key` was first given with another request; located at the first difference."""
    if first is not None and first.pipeline != pipeline:
        where, what = "", f"pipeline {first.pipeline!r}"
    else:
        where = _first_difference(first.request if first is not None else {}, request)
        what = "another request body"
    return Refused(
        409,
        (
            Problem(
                codes.SERVE_IDEMPOTENCY_CONFLICT,
                f"Idempotency-Key {key[:64]!r} was first used with {what}",
                where,
                "send a new Idempotency-Key for a new request, or the first request's body "
                "unchanged to get its run",
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
