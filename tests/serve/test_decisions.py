"""Whether decisions apply to a run: paused, of a served pipeline, pending ids only."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest

from converge_dsl.serve._decisions import check_decisions, pending_ids
from converge_dsl.serve._requests import Refused
from converge_dsl.serve._store import RunRow

from .conftest import DATA, Server, serve_with_token


def _row(status: str = "paused", pipeline: str = "gated") -> RunRow:
    return RunRow(
        id="r1",
        pipeline=pipeline,
        request={},
        status=status,
        stop_reason="hitl_pause" if status == "paused" else "converged",
        decisions={},
        attempts=1,
        result={"pending": [{"id": "s1"}, {"id": "s2"}, "not a proposal"]},
        created=0.0,
        updated=0.0,
    )


def _refusal(row: RunRow, decisions: dict[str, bool]) -> tuple[int, list[tuple[str, str]]]:
    with pytest.raises(Refused) as refused:
        check_decisions(row, decisions, {"gated"})
    return refused.value.status, [(p.message, p.hint or "") for p in refused.value.problems]


def test_pending_ids_of_a_paused_run() -> None:
    assert pending_ids(_row().result) == ["s1", "s2"]
    assert pending_ids(None) == []


def test_decisions_on_pending_ids_of_a_served_paused_run_apply() -> None:
    check_decisions(_row(), {"s1": True, "s2": False}, {"gated"})


def test_a_run_not_paused_is_409() -> None:
    assert _refusal(_row(status="done"), {"s1": True}) == (
        409,
        [
            (
                "run 'r1' is done, not paused for a decision",
                "decisions apply to a run whose status is paused",
            )
        ],
    )


def test_a_run_of_a_pipeline_not_served_is_409_before_its_ids_are_looked_at() -> None:
    assert _refusal(_row(pipeline="retired"), {"s9": True}) == (
        409,
        [
            (
                "run 'r1' is of pipeline 'retired', which this server does not serve",
                "start the server with pipeline 'retired' to decide it; the run stays paused",
            )
        ],
    )


def test_unknown_ids_are_422_each_with_the_closest_pending_one() -> None:
    assert _refusal(_row(), {"s1x": True, "x": False}) == (
        422,
        [
            ("no pending proposal has id 's1x'", "did you mean 's1'?"),
            ("no pending proposal has id 'x'", "pending: s1, s2"),
        ],
    )


def test_over_http_a_contradiction_or_an_unknown_id_is_located_and_the_run_stays_paused(
    tmp_path: Path, servers: list[Server]
) -> None:
    token = "c0ffee5e7b1d4a9f8e2c6b3a1d0f9e8c"
    url = serve_with_token(tmp_path, servers, [DATA], token).ready()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        run = http.post("/v1/pipelines/gated/runs?wait=true", timeout=30).json()["id"]
        decided = f"/v1/runs/{run}/decisions"
        both = http.post(decided, json={"approve": ["s1"], "reject": ["s2", "s1"]})
        assert both.status_code == 422
        (problem,) = both.json()["errors"]
        assert (problem["pointer"], problem["message"]) == (
            "/reject/1",
            "proposal 's1' is both approved and rejected",
        )
        assert problem["hint"] == "decide it once (it is also decided at /approve/0)"
        mixed = http.post(decided, json={"approve": ["s1"], "decisions": {"s1": False}})
        assert mixed.json()["errors"][0]["pointer"] == "/decisions/s1"
        unknown = http.post(decided, json={"approve": ["s1", "s3"], "reject": ["s2"]})
        assert unknown.status_code == 422
        assert [(p["pointer"], p["hint"]) for p in unknown.json()["errors"]] == [
            ("/approve/1", "pending: s1, s2")
        ]
        assert http.get(f"/v1/runs/{run}").json()["status"] == "paused"
        again = http.post(decided, json={"approve": ["s1", "s1"], "reject": ["s2"]})
        assert again.status_code == 200


def test_the_closest_pending_id_is_quoted_as_every_message_quotes_a_name() -> None:
    """A pending id with a quote in it is guessed in the project's quoting (`suggestion`).
    Before, Python's repr quoted it: `did you mean "it's"?`."""
    row = dataclasses.replace(_row(), result={"pending": [{"id": "it's"}]})
    assert _refusal(row, {"its": True}) == (
        422,
        [("no pending proposal has id 'its'", "did you mean 'it\\x27s'?")],
    )
