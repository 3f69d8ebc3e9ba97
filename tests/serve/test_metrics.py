"""The Prometheus text: runs by status and stop reason, usage, queues, latency histograms."""

from __future__ import annotations

from converge_dsl.serve._metrics import Metrics


def test_the_text_format() -> None:
    metrics = Metrics()
    metrics.submitted("r1", 10.0)
    usage = {"model_calls": 2, "input_tokens": 30, "output_tokens": 7}
    metrics.finished("p", {"usage": usage}, 0.02)
    metrics.ended("r1", "done", 10.3)
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
