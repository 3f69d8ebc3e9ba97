"""What a stored run is started with: whether it continues from its checkpoint
journal, the decisions it applies there, and its budget limits.

The same for a run on the service's loops and one sent to a worker
(`--executor process|ray`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ._requests import RunRequest

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline
    from converge_dsl.runtime import JournalMedium, SqliteJournals

    from ._store import RunRow


def resumption(
    journals: SqliteJournals, pipeline: Pipeline, row: RunRow
) -> tuple[bool, dict[str, bool]]:
    """Whether `row` continues from its journal in `journals`, and the decisions it
    applies."""
    # A first attempt has no journal; a later one without one was killed before its
    # first record was committed: it starts afresh.
    resume = row.attempts > 1 and journals.exists(row.id)
    decisions = dict(row.decisions)
    if decisions and not (resume and _paused_in(journals.journal(row.id), pipeline.env)):
        decisions = {}  # applied before a crash: the journal already goes on from them
    return resume, decisions


def limits_of(row: RunRow, max_run_s: float | None) -> dict[str, float]:
    """The budget limits of `row`'s run: its request's, and the service's `max_run_s` as
    `max_wall_s` where that is lower."""
    limits = dict(RunRequest.of(row.request).budget)
    if max_run_s is not None:
        limits["max_wall_s"] = min(limits.get("max_wall_s", max_run_s), max_run_s)
    return limits


def _paused_in(journal: JournalMedium, env: Mapping[str, str]) -> bool:
    """Whether the checkpoint in `journal` holds proposals waiting for a decision."""
    from converge_dsl.runtime import CheckpointStore, checkpoint_key

    checkpoint = CheckpointStore(None, checkpoint_key(env), medium=journal).read()
    return checkpoint.state is not None and bool(checkpoint.state.pending)
