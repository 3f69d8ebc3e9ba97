"""The structured-facts example end to end: an llm's JSON answer -> rules -> a solver.

`pipelines/support-triage.yaml` runs offline on its scripted model: each item
of the classifier's answer becomes a `tickets` fact whose data the key's
schema checks; a rule escalates on `data.urgency`; another builds the
scheduling problem from the tickets' data; the greedy-scheduling solver
plans it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.cli import run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _run(*argv: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = run(["run", "pipelines/support-triage.yaml", "--format", "json", *argv], out, err)
    assert code == 0, err.getvalue()
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def test_the_answer_flows_as_data_to_a_rule_and_a_solver() -> None:
    result = _run()
    assert result["stop_reason"] == "converged"
    facts = result["facts"]
    tickets = {f["id"]: f["data"] for f in facts["tickets"]}
    assert tickets["ticket-T-102"] == {
        "id": "T-102",
        "category": "bug",
        "urgency": 3,
        "duration": 45,
        "deadline": 60,
    }
    (escalation,) = facts["signals"]
    assert escalation["data"] == {"tickets": ["T-102"]}
    (problem,) = facts["workload"]
    assert problem["data"]["machines"] == [{"id": "ana"}, {"id": "ben"}]
    assert [job["id"] for job in problem["data"]["jobs"]] == ["T-101", "T-102", "T-103", "T-104"]
    (plan,) = facts["schedule"]
    scheduled = {row["job"] for row in plan["data"]["plan"]["schedule"]}
    assert scheduled == {"T-101", "T-102", "T-103", "T-104"}
    assert plan["data"]["plan"]["late_jobs"] == []
    assert "diagnostic" not in facts


def test_the_example_is_deterministic() -> None:
    assert _run() == _run()
