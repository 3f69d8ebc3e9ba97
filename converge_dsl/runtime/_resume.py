"""Continuing a run from its checkpoint, with the human decisions on a paused run.

A checkpoint with nothing pending simply goes on. A paused one goes on once
every pending id is decided by the user (`given`, with who gave each in
`given_by`); until then the decisions given so far are kept in the checkpoint
folder, sealed and bound to this pause (`_decisions`), and the engine
re-reports the pause (nothing runs). Applying the decisions is traced: the
engine emits one `proposal_decided` event per pending proposal, with who gave
it, before anything else runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from converge_dsl import codes
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.engine import Engine, ProposedFact
from converge_dsl.engine.state import HitlPause, RunResult
from converge_dsl.errors import UsageError

from ._checkpoint import Checkpoint, CheckpointStore

# Who gave a decision the caller did not attribute: a program through the Python API.
API = "api"


async def continue_run(
    engine: Engine,
    store: CheckpointStore,
    checkpoint: Checkpoint,
    seeds: Sequence[ProposedFact],
    given: Mapping[str, bool],
    *,
    given_by: Mapping[str, str] | None = None,
) -> tuple[RunResult, Mapping[str, bool]]:
    """Resume from a checkpoint; a paused one goes on once every pending id is decided.

    `checkpoint.state` None (no cycle had finished) runs afresh from `seeds`. Returns the
    result and the decisions still waiting (a run that stays paused). Raises
    `UsageError` for decisions on a checkpoint with nothing pending and for ids
    that are not pending, `CheckpointRefused` (CD932) for kept decisions that
    this user did not seal for this pause.
    """
    start = checkpoint.state
    if start is None or not start.pending:
        if given:
            raise UsageError(
                "the checkpoint holds no proposal awaiting a decision",
                hint="--approve/--reject apply to a run that stopped with hitl_pause (exit 6)",
                code=codes.INPUT_REFUSED,
            )
        if start is None:
            return await engine.run(seeds, on_cycle_end=store.save), {}
        result = await engine.run(resume_from=start, on_cycle_end=store.save)
        return result, {}
    ids = [item.id for item in start.pending]
    for key in given:
        if key not in ids:
            close = did_you_mean(key, ids)
            raise UsageError(
                f"no pending proposal has id {key!r}",
                hint=suggestion(close) if close else f"pending: {', '.join(ids)}",
                code=codes.INPUT_REFUSED,
            )
    by = given_by or {}
    kept = store.load_decisions(checkpoint.last_mac, start.pending)
    kept.update({item: (approve, by.get(item, API)) for item, approve in given.items()})
    decisions = {item: approve for item, (approve, _) in kept.items()}
    if any(item not in decisions for item in ids):
        store.save_decisions(checkpoint.last_mac, kept, start.pending)
        # Nothing runs: the engine re-reports the pause from the checkpointed state.
        result = await engine.run(resume_from=start)
        return result, decisions
    store.clear_decisions()
    result = await engine.resume(
        HitlPause(start.pending, start),
        decisions,
        on_cycle_end=store.save,
        decided_by={item: who for item, (_, who) in kept.items()},
    )
    return result, {}
