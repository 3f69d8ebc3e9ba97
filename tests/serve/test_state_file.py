"""A state folder deleted or replaced while serving: writes refused, /healthz failing."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from converge_dsl.serve._app import HttpLimits
from converge_dsl.serve._state_file import StateFile

from .conftest import in_process


def test_a_state_folder_deleted_while_serving_refuses_writes(tmp_path: Path) -> None:
    """Over HTTP: runs were taken into the deleted database (SQLite writes on to an open
    file) and /healthz said ok; now each write is a 503 (CD993) and /healthz too, while
    what the process holds can still be read."""
    state = tmp_path / "state"
    body = {"inputs": {"text": "a"}}
    with in_process(state, HttpLimits()) as url, httpx.Client(base_url=url, timeout=30) as c:
        run = c.post("/v1/pipelines/echo/runs?wait=true", json=body).json()["id"]
        assert c.get("/healthz").status_code == 200
        shutil.rmtree(state)
        for answer in (
            c.post("/v1/pipelines/echo/runs?wait=true", json=body),
            c.delete(f"/v1/runs/{run}"),
            c.get("/healthz"),
        ):
            assert answer.status_code == 503, answer.text
            (problem,) = answer.json()["errors"]
            assert problem["code"] == "CD993"
            assert problem["message"].startswith(
                "the service's state database was deleted while the service runs"
            )
            assert answer.headers["retry-after"] == "30"
        assert c.get(f"/v1/runs/{run}").json()["status"] == "done"


def test_a_replaced_state_file_is_a_problem(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    path.write_text("a")
    state = StateFile(path)
    assert state.problem() is None
    replaced = tmp_path / "other"
    replaced.write_text("b")
    replaced.replace(path)
    assert state.problem() == "was replaced by another file while the service runs"
