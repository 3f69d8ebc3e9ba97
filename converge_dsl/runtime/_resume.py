"""Continuing a run from its checkpoint, with the human decisions on a paused run.

A checkpoint with nothing pending simply goes on. A paused one goes on once
every pending id is decided; until then the decisions given so far are kept in
the checkpoint folder and the engine re-reports the pause (nothing runs).
Applying the decisions is traced: the engine emits one `proposal_decided`
event per pending proposal before anything else runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from converge_dsl.diagnostics import did_you_mean
from converge_dsl.engine import Engine, ProposedFact
from converge_dsl.engine.state import EngineState, HitlPause, RunResult
from converge_dsl.errors import UsageError

from ._checkpoint import CheckpointStore


async def continue_run(
    engine: Engine,
    store: CheckpointStore,
    start: EngineState | None,
    seeds: Sequence[ProposedFact],
    given: Mapping[str, bool],
) -> tuple[RunResult, Mapping[str, bool]]:
    """Resume from a checkpoint; a paused one goes on once every pending id is decided.

    `start` None (no cycle had finished) runs afresh from `seeds`. Returns the
    result and the decisions still waiting (a run that stays paused). Raises
    `UsageError` for decisions on a checkpoint with nothing pending and for ids
    that are not pending.
    """
    if start is None or not start.pending:
        if given:
            raise UsageError(
                "the checkpoint holds no proposal awaiting a decision",
                hint="--approve/--reject apply to a run that stopped with hitl_pause (exit 6)",
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
                hint=f"did you mean {close!r}?" if close else f"pending: {', '.join(ids)}",
            )
    decisions = {**store.load_decisions(), **given}
    if any(item not in decisions for item in ids):
        store.save_decisions(decisions)
        # Nothing runs: the engine re-reports the pause from the checkpointed state.
        result = await engine.run(resume_from=start)
        return result, decisions
    store.clear_decisions()
    result = await engine.resume(
        HitlPause(start.pending, start), decisions, on_cycle_end=store.save
    )
    return result, {}
