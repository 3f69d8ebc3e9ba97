"""A run's result as the service stores and answers it: the document of a run that
failed (`failed`), any run's with its diagnostics passed through the redactor
(`redacted`), so no token or API key leaves in a message, and the event its waiters
wait on (`Stopped`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl._json_types import JsonObject
from converge_dsl.errors import ConvergeError

if TYPE_CHECKING:
    from ._store import RunRow


def failed(
    error: ConvergeError, path: Path, redact: Callable[[str], str]
) -> tuple[str, JsonObject]:
    """The stop reason and the redacted result document of a run that stopped on `error`
    (of the pipeline at `path`)."""
    from converge_dsl.runtime import not_run_document

    body: dict[str, Any] = not_run_document(error, path).model_dump(mode="json")
    body = redacted(body, redact)
    return str(body.get("stop_reason")), body


def redacted(body: dict[str, Any], redact: Callable[[str], str]) -> dict[str, Any]:
    """`body`, a run-result document, with its diagnostics passed through `redact`."""
    for item in body.get("diagnostics") or []:
        item["message"] = redact(str(item.get("message", "")))
        if item.get("hint"):
            item["hint"] = redact(str(item["hint"]))
    return body


class Stopped(asyncio.Event):
    """Set when a run stops; `row` is the run as stored then, when its worker ended it.
    `queued`: made when `submit` queued the run, so the run has not stopped yet (a run
    that stops takes its `Stopped` out of `_ended`)."""

    row: RunRow | None = None

    def __init__(self, *, queued: bool = False) -> None:
        super().__init__()
        self.queued = queued
