"""The events a run opens with: `RunStarted`, then the human decisions it applies.

Engine-internal: `Run` calls these at its start. `emit_opening` reports the
run and each decision a paused run was resumed with (`ProposalDecided`, in
pending order); `emit_still_pending` re-reports the proposals of a pause
resumed before every one was decided (`ProposalPending`), so that each run's
trace lists them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from converge_dsl.engine import events as ev
from converge_dsl.engine._runstate import EventLog
from converge_dsl.engine.budget import Budget
from converge_dsl.engine.events import from_fields
from converge_dsl.engine.state import PendingProposal

# A proposal a paused run held, whether a human approved it, and who gave the decision
# (`cli`, `file:NAME`, `api`; None when the caller did not say).
Decided = tuple[PendingProposal, bool, str | None]


def emit_opening(
    log: EventLog,
    *,
    suggestors: int,
    seeds: int,
    resumed_from: int | None,
    budget: Budget,
    decided: Sequence[Decided],
) -> None:
    """`RunStarted`, then one `ProposalDecided` per (pending proposal, approve, by), in order."""
    if not log.enabled:
        return
    log.emit(
        from_fields(
            ev.RunStarted,
            {
                "suggestors": suggestors,
                "seeds": seeds,
                "resumed_from_cycle": resumed_from,
                # Its fields are numbers or None: no deep copy (`dataclasses.asdict`) needed.
                "budget": {f.name: getattr(budget, f.name) for f in dataclasses.fields(budget)},
                "timing": log.timing(),
            },
        )
    )
    for item, approve, by in decided:
        log.emit(
            from_fields(
                ev.ProposalDecided,
                {
                    "cycle": item.cycle,
                    "suggestor": item.suggestor,
                    "key": item.proposal.key,
                    "id": item.id,
                    "decision": "approved" if approve else "rejected",
                    "reason": item.reason,
                    "by": by,
                    "data": item.proposal.data,
                    "timing": log.timing(),
                },
            )
        )


def emit_still_pending(log: EventLog, pending: Iterable[PendingProposal]) -> None:
    """One `ProposalPending` per proposal a resumed pause still holds."""
    if not log.enabled:
        return
    for item in pending:
        log.emit(pending_event(item))


def pending_event(item: PendingProposal) -> ev.ProposalPending:
    """The `ProposalPending` event of a proposal held for a human."""
    return from_fields(
        ev.ProposalPending,
        {
            "cycle": item.cycle,
            "suggestor": item.suggestor,
            "key": item.proposal.key,
            "id": item.id,
            "reason": item.reason,
            "data": item.proposal.data,
        },
    )
