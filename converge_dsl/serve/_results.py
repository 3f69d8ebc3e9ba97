"""A run's result as the service stores and answers it: the document of a run that
failed (`failed`), any run's with its diagnostics passed through the redactor
(`redacted`), so no token or API key leaves in a message, the event its waiters
wait on (`Stopped`), the run as its end stored it (`ended_row`), the wait for a
write of the group commit (`committed`), and the adds of the group commit waited on
(`Adds`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from converge_dsl._json_types import JsonObject
from converge_dsl.errors import ConvergeError

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
    that stops takes its `Stopped` out of `_runs.ended`)."""

    row: RunRow | None = None

    def __init__(self, *, queued: bool = False) -> None:
        super().__init__()
        self.queued = queued


def ended_row(
    row: RunRow, status: str, reason: str, body: JsonObject | None, text: str | None, *, at: float
) -> RunRow:
    """`row` as the store holds it once its end (`status`, `reason`, result `body` written
    as `text`, at `at`) is stored, without reading it back."""
    # built whole: `dataclasses.replace` costs about twice as much (3.4 against 1.9 us)
    return RunRow(
        row.id,
        row.pipeline,
        row.request,
        status,
        reason,
        {},
        row.attempts,
        body,
        row.created,
        at,
        result_json=text,
    )


async def committed(write: Future[None] | None) -> None:
    """Once `write`, a write of the group commit, is committed (at once when it is
    already: no wake-up of the loop); its error raised."""
    if write is not None and not write.done():
        # shielded: a waiter cancelled (its client gone) leaves the write to the others
        await asyncio.shield(asyncio.wrap_future(write))
    elif write is not None:
        write.result()


class Adds:
    """The adds of runs written with the group commit (`RunStore.add_later`) that waiters
    may still wait on: each until it is committed, or, when it failed, until the service
    was told (`failed(run)`, called on the service's loop) and `forget`s it."""

    def __init__(self) -> None:
        self._writes: dict[str, Future[None]] = {}

    def watch(
        self,
        run: str,
        write: Future[None],
        loop: asyncio.AbstractEventLoop,
        failed: Callable[[str], object],
    ) -> None:
        """Keep `write`, the add of `run`; its error at once when it could not be queued."""
        if write.done():
            write.result()
        self._writes[run] = write

        def told(done: Future[None]) -> None:  # on the group commit's thread
            if done.exception() is None:
                self._writes.pop(run, None)
            else:
                loop.call_soon_threadsafe(failed, run)

        write.add_done_callback(told)

    def get(self, run: str) -> Future[None] | None:
        return self._writes.get(run)

    def forget(self, run: str) -> None:
        self._writes.pop(run, None)
