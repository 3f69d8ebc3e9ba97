"""The Prometheus text: runs by status and stop reason, usage, queues, latency histograms."""

from __future__ import annotations

from pathlib import Path

import httpx

from converge_dsl.serve._metrics import Metrics

from .conftest import DATA, Server, until


def test_the_text_format() -> None:
    metrics = Metrics()
    metrics.submitted("r1", 10.0)
    usage = {"model_calls": 2, "input_tokens": 30, "output_tokens": 7}
    metrics.finished("p", {"usage": usage}, 0.02)
    metrics.ended("r1", 10.3)
    metrics.rejected("p")
    text = metrics.text(
        {("p", "done", "converged"): 3, ('q"x', "paused", "hitl_pause"): 1}, {"p": 2}, 1
    )
    lines = text.splitlines()
    assert 'converge_runs{pipeline="p",status="done",stop_reason="converged"} 3' in lines
    assert 'converge_runs{pipeline="q\\"x",status="paused",stop_reason="hitl_pause"} 1' in lines
    assert 'converge_model_calls_total{pipeline="p"} 2' in lines
    assert 'converge_tokens_total{pipeline="p",direction="input"} 30' in lines
    assert 'converge_queue_depth{pipeline="p"} 2' in lines
    assert "converge_runs_in_progress 1" in lines
    assert 'converge_rejected_total{pipeline="p"} 1' in lines
    assert 'converge_run_seconds_bucket{pipeline="p",le="0.025"} 1' in lines
    assert 'converge_run_seconds_bucket{pipeline="p",le="0.01"} 0' in lines
    assert 'converge_request_latency_seconds_bucket{le="0.5"} 1' in lines
    assert "converge_request_latency_seconds_count 1" in lines
    assert "# TYPE converge_run_seconds histogram" in lines


def _latencies(http: httpx.Client) -> int:
    (line,) = [
        line
        for line in http.get("/metrics").text.splitlines()
        if line.startswith("converge_request_latency_seconds_count")
    ]
    return int(line.split()[1])


def test_every_stop_of_a_run_is_a_latency_even_after_a_pause_or_a_cancel(
    tmp_path: Path, servers: list[Server]
) -> None:
    """A pause, the stop after a decision, and a queued run cancelled at once are each
    counted in converge_request_latency_seconds: the stop of a run resumed by a
    decision and a queued run's cancelling were never counted, the latter's start kept
    for the life of the process."""
    server = Server([DATA / "gated.yaml", DATA / "slow.yaml"], tmp_path / "state", "--workers", "1")
    servers.append(server)
    with httpx.Client(base_url=server.ready(), timeout=30) as http:
        paused = http.post("/v1/pipelines/gated/runs?wait=true").json()
        assert paused["status"] == "paused"
        assert _latencies(http) == 1
        decided = http.post(f"/v1/runs/{paused['id']}/decisions", json={"approve": ["s1", "s2"]})
        assert decided.status_code == 200
        until(lambda: _latencies(http) == 2, 20)  # its stop once resumed
        assert http.get(f"/v1/runs/{paused['id']}").json()["status"] == "done"
        running = http.post("/v1/pipelines/slow/runs").json()["id"]  # its one worker's
        queued = http.post("/v1/pipelines/slow/runs").json()["id"]
        assert http.delete(f"/v1/runs/{queued}").json()["status"] == "cancelled"
        assert _latencies(http) == 3
        http.delete(f"/v1/runs/{running}")


def test_every_served_pipeline_has_its_lines_at_zero_from_the_start(
    tmp_path: Path, servers: list[Server]
) -> None:
    """Before any run stopped: model calls, tokens, 429s and run seconds of each served
    pipeline at 0 (they appeared at a pipeline's first run, so `rate()` missed it)."""
    server = Server([DATA / "gated.yaml", DATA / "echo.yaml"], tmp_path / "state")
    servers.append(server)
    with httpx.Client(base_url=server.ready(), timeout=30) as http:
        lines = http.get("/metrics").text.splitlines()
    for pipeline in ("echo", "gated"):
        label = f'pipeline="{pipeline}"'
        for line in (
            f"converge_model_calls_total{{{label}}} 0",
            f'converge_tokens_total{{{label},direction="input"}} 0',
            f'converge_tokens_total{{{label},direction="output"}} 0',
            f"converge_rejected_total{{{label}}} 0",
            f'converge_run_seconds_bucket{{{label},le="+Inf"}} 0',
            f"converge_run_seconds_count{{{label}}} 0",
            f"converge_queue_depth{{{label}}} 0",
        ):
            assert line in lines, line
