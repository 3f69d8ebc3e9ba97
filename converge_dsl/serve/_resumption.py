"""What a stored run is started with: whether it continues from its checkpoint
journal, the decisions it applies there, and its budget limits; and the run itself
on the service's loops (`local_run`), whose journal can stop it at a checkpoint
(`StopAtCheckpoint`, a stopping service's).

The same for a run on the service's loops and one sent to a worker
(`--executor process|ray`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl._json_types import JsonObject

from ._requests import RunRequest

if TYPE_CHECKING:
    from converge_dsl.batch import Pipeline
    from converge_dsl.engine import Budget
    from converge_dsl.runtime import JournalMedium, SqliteJournal, SqliteJournals

    from ._events import EventSink
    from ._store import RunRow

# Who gave a decision over HTTP, as the resumed run's `proposal_decided` events say.
DECIDED_BY = "http"


async def local_run(
    pipeline: Pipeline,
    row: RunRow,
    sink: EventSink,
    journal: StopAtCheckpoint,
    *,
    state: Path,
    key: Callable[[], bytes],
    max_run_s: float | None,
) -> JsonObject:
    """The run of `row` with its events on `sink` and its checkpoint in `journal` (sealed
    with `key()`, read as the run starts: a key that cannot be read fails the run, CD954):
    its run-result document as JSON (`RunOutcome.plain`)."""
    from converge_dsl.runtime import Checkpointing

    sealing = key()
    resume, decisions = resumption(journal.journals, pipeline, row)
    checkpoint = Checkpointing(
        state,
        resume=resume,
        decisions=decisions,
        env=pipeline.env,
        decided_by=dict.fromkeys(decisions, DECIDED_BY),
        journal=journal,
        key=sealing,
    )
    request = RunRequest.of(row.request)
    limits = RunRequest({}, limits_of(row, max_run_s))

    def budget(pipeline_budget: Budget) -> Budget:
        return limits.lowered(pipeline_budget)

    out = await pipeline.outcome(
        request.inputs, sinks=(sink,), checkpoint=checkpoint, budget=budget
    )
    return out.plain


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


class StopAtCheckpoint:
    """A run's `SqliteJournal` that stops keeping the run at the first checkpoint record
    written once `stopping()` holds: `halt()` is called right after that record was
    queued (with the events made until then, `alongside` it), and every write after it is
    dropped, `drop()` told of each. The run is then stopped (cancelled) where it stands;
    what it did past that record is neither journaled nor, its events kept by the halted
    `LiveRun`, shown: the attempt that continues it from that record gives it anew, once.
    A run that reached its end before the cancel, nothing of it dropped, ends as stored;
    a record written once it made its last event (`finished()`) does not stop it (the
    pause rule: docs/architecture.md, "Stopping the service"). `cut()` stops keeping
    it at once, as at a record (the service's stop past its bound)."""

    def __init__(
        self,
        journal: SqliteJournal,
        stopping: Callable[[], bool],
        halt: Callable[[], None],
        drop: Callable[[], None],
        finished: Callable[[], bool],
    ) -> None:
        self._journal = journal
        self._stopping = stopping
        self._finished = finished
        self._halt = halt
        self._drop = drop
        self.halted = False

    @property
    def journals(self) -> SqliteJournals:
        return self._journal.journals

    @property
    def where(self) -> str:
        return self._journal.where

    @property
    def decisions_where(self) -> str:
        return self._journal.decisions_where

    def read(self) -> bytes:
        return self._journal.read()

    def reopen(self, end: int) -> None:
        self._journal.reopen(end)

    def read_decisions(self) -> bytes | None:
        return self._journal.read_decisions()

    def flush(self) -> None:
        self._journal.flush()

    def close(self) -> None:
        self._journal.close()

    def hold(self, option: str) -> contextlib.AbstractContextManager[None]:
        return self._journal.hold(option)

    def append(self, line: bytes) -> None:
        if self._dropped():
            return
        self._journal.append(line)
        if self._stopping() and not self._finished():  # a cycle's record: it stops here
            self.cut()

    def replace(self, line: bytes) -> None:
        if not self._dropped():
            self._journal.replace(line)

    def write_decisions(self, line: bytes) -> None:
        if not self._dropped():
            self._journal.write_decisions(line)

    def clear_decisions(self) -> None:
        if not self._dropped():
            self._journal.clear_decisions()

    def cut(self) -> None:
        """Stop keeping the run now, as at a record (the service's stop cuts it there)."""
        self.halted = True
        self._halt()

    def _dropped(self) -> bool:
        """Whether a write is dropped now (halted), `drop()` told when it is."""
        if self.halted:
            self._drop()
        return self.halted
