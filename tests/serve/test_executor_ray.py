"""`serve --executor ray` on a local Ray the server starts: a run, its events, a pause
resumed with decisions, a cancel. Few tests: Ray takes seconds to start."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import DATA, Server, until
from .test_app import client

pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install '.[ray]')")


def test_on_a_local_ray_runs_stream_pause_and_resume(tmp_path: Path, servers: list[Server]) -> None:
    server = Server(
        [DATA],
        tmp_path / "state",
        "--executor",
        "ray",
        "--processes",
        "1",
        "--wait-timeout",
        "60",
    )
    servers.append(server)
    url = server.ready()
    with client(url, {}) as http:
        done = http.post("/v1/pipelines/echo/runs?wait=true", json={"inputs": {"text": "ray"}})
        assert done.json()["result"]["facts"]["echoes"][0]["data"] == {"text": "ray"}
        events = http.get(f"/v1/runs/{done.json()['id']}/events").text
        assert '"type":"run_started"' in events
        assert events.rstrip().endswith('{"status": "done", "stop_reason": "converged"}')
        paused = http.post("/v1/pipelines/gated/runs?wait=true").json()
        assert paused["status"] == "paused"
        http.post(f"/v1/runs/{paused['id']}/decisions", json={"approve": ["s1", "s2"]})
        until(lambda: http.get(f"/v1/runs/{paused['id']}").json()["status"] == "done", 60)
        slow = http.post("/v1/pipelines/slow/runs").json()["id"]
        until(lambda: http.get(f"/v1/runs/{slow}").json()["status"] == "running", 30)
        http.delete(f"/v1/runs/{slow}")
        until(lambda: http.get(f"/v1/runs/{slow}").json()["status"] == "cancelled", 20)
        assert "result" not in http.get(f"/v1/runs/{slow}").json()
        resumed = http.get(f"/v1/runs/{paused['id']}").json()
    facts = resumed["result"]["facts"]
    assert [f["id"] for f in facts["strategies"]] == ["s1", "s2"]
