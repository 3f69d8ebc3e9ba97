"""Whether decisions apply to a run (`check_decisions`): the run is paused, this
server serves its pipeline, and every proposal id decided is one the run holds
pending. A refusal is the HTTP API's error body: 409 (CD991) for a run in
another state or of a pipeline not served (the state outlives the pipelines a
restarted server loads; the run stays paused for a server that serves it), 422
naming each unknown id with the closest pending one (at the pointer it was
given at, for `Decisions` read from a body). The MCP `decideRun` tool
answers the same body.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from converge_dsl import codes
from converge_dsl._json_types import JsonObject

from ._requests import Decisions, Problem, Refused, refused
from ._store import RunRow


def check_decisions(row: RunRow, decisions: Mapping[str, bool], served: Container[str]) -> None:
    """Nothing when `decisions` apply to `row` and `served` holds its pipeline; else
    `Refused` (see the module docstring)."""
    run = row.id
    if row.status != "paused":
        raise refused(
            409,
            codes.SERVE_BAD_DECISION,
            f"run {run!r} is {row.status}, not paused for a decision",
            "",
            "decisions apply to a run whose status is paused",
        )
    if row.pipeline not in served:
        raise refused(
            409,
            codes.SERVE_BAD_DECISION,
            f"run {run!r} is of pipeline {row.pipeline!r}, which this server does not serve",
            "",
            f"start the server with pipeline {row.pipeline!r} to decide it; the run stays paused",
        )
    pending = pending_ids(row.result)
    unknown = [item for item in decisions if item not in pending]
    if unknown:
        from converge_dsl.diagnostics import unknown_name_hint

        problems = []
        for item in unknown:
            problems.append(
                Problem(
                    codes.SERVE_BAD_DECISION,
                    f"no pending proposal has id {item!r}",
                    decisions.places.get(item, "") if isinstance(decisions, Decisions) else "",
                    unknown_name_hint(item, pending, f"pending: {', '.join(pending)}"),
                )
            )
        raise Refused(422, tuple(problems))


def pending_ids(result: JsonObject | None) -> list[str]:
    """The ids of the proposals a paused run's result lists as pending."""
    pending = (result or {}).get("pending")
    if not isinstance(pending, list):
        return []
    return [str(item.get("id")) for item in pending if isinstance(item, dict)]
