"""The service's figures in the Prometheus text format (`GET /metrics`).

Runs by pipeline, status and stop reason come from the store (they survive
a restart); model calls, tokens, rejected requests and the latency of runs
(a histogram: seconds from a request to the run's next stop, where the request
is the POST that queued the run or the decision that queued it again, and the
stop is its end, its cancelling or its pause) are counted by this process since
it started; queue depth and runs in progress are read when asked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class Histogram:
    """A cumulative histogram over `BUCKETS` (seconds)."""

    def __init__(self) -> None:
        self.counts = [0] * len(BUCKETS)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.total += 1
        self.sum += value
        for index, bound in enumerate(BUCKETS):
            if value <= bound:
                self.counts[index] += 1


class Metrics:
    """The counters of this process (see the module docstring). Each of `pipelines` (the
    served ones) has its lines in every family by pipeline from the start, at 0: a
    series that appears only at its first increment hides that increment from `rate()`
    and `increase()`, and a pipeline no run of which stopped yet would have none."""

    def __init__(self, pipelines: Iterable[str] = ()) -> None:
        self.model_calls: dict[str, int] = defaultdict(int)
        self.tokens: dict[tuple[str, str], int] = defaultdict(int)
        self.rejections: dict[str, int] = defaultdict(int)
        self.run_seconds: dict[str, Histogram] = defaultdict(Histogram)
        self.latency = Histogram()
        self._submitted: dict[str, float] = {}
        for pipeline in pipelines:
            self.model_calls[pipeline] = self.rejections[pipeline] = 0
            self.tokens[pipeline, "input"] = self.tokens[pipeline, "output"] = 0
            self.run_seconds[pipeline] = Histogram()

    def submitted(self, run: str, now: float) -> None:
        """`run` was queued (or queued again by a decision) at `now`."""
        self._submitted[run] = now

    def forget(self, run: str) -> None:
        """`run` was never stored (its add failed): no stop of it is to come."""
        self._submitted.pop(run, None)

    def rejected(self, pipeline: str) -> None:
        self.rejections[pipeline] += 1

    def finished(self, pipeline: str, body: Mapping[str, Any], seconds: float) -> None:
        usage = body.get("usage") or {}
        self.model_calls[pipeline] += int(usage.get("model_calls") or 0)
        self.tokens[pipeline, "input"] += int(usage.get("input_tokens") or 0)
        self.tokens[pipeline, "output"] += int(usage.get("output_tokens") or 0)
        self.run_seconds[pipeline].observe(seconds)

    def ended(self, run: str, now: float) -> None:
        """`run` stopped at `now` (ended, cancelled or paused): its latency since it was
        queued, if this process queued it."""
        start = self._submitted.pop(run, None)
        if start is not None:
            self.latency.observe(now - start)

    def text(
        self,
        counts: Mapping[tuple[str, str, str], int],
        queues: Mapping[str, int],
        running: int,
    ) -> str:
        lines: list[str] = []

        def family(name: str, kind: str, text: str) -> None:
            lines.extend((f"# HELP {name} {text}", f"# TYPE {name} {kind}"))

        family("converge_runs", "gauge", "Stored runs by pipeline, status and stop reason.")
        for (pipeline, status, reason), count in sorted(counts.items()):
            labels = _labels(pipeline=pipeline, status=status, stop_reason=reason)
            lines.append(f"converge_runs{labels} {count}")
        family("converge_model_calls_total", "counter", "Model calls of runs that stopped.")
        for pipeline, calls in sorted(self.model_calls.items()):
            lines.append(f"converge_model_calls_total{_labels(pipeline=pipeline)} {calls}")
        family("converge_tokens_total", "counter", "Tokens of runs that stopped.")
        for (pipeline, direction), tokens in sorted(self.tokens.items()):
            labels = _labels(pipeline=pipeline, direction=direction)
            lines.append(f"converge_tokens_total{labels} {tokens}")
        family("converge_queue_depth", "gauge", "Runs waiting for a worker.")
        for pipeline, depth in sorted(queues.items()):
            lines.append(f"converge_queue_depth{_labels(pipeline=pipeline)} {depth}")
        family("converge_runs_in_progress", "gauge", "Runs executing now.")
        lines.append(f"converge_runs_in_progress {running}")
        family("converge_rejected_total", "counter", "Run requests refused with 429.")
        for pipeline, count in sorted(self.rejections.items()):
            lines.append(f"converge_rejected_total{_labels(pipeline=pipeline)} {count}")
        family("converge_run_seconds", "histogram", "Execution time of a run, in seconds.")
        for pipeline, histogram in sorted(self.run_seconds.items()):
            lines += _histogram("converge_run_seconds", histogram, pipeline=pipeline)
        family(
            "converge_request_latency_seconds",
            "histogram",
            "Seconds from a run's request or decision to its next stop (this process's runs).",
        )
        lines += _histogram("converge_request_latency_seconds", self.latency)
        return "\n".join(lines) + "\n"


def _histogram(name: str, histogram: Histogram, **labels: str) -> list[str]:
    out = []
    for bound, count in zip(BUCKETS, histogram.counts, strict=True):
        out.append(f"{name}_bucket{_labels(**labels, le=repr(bound))} {count}")
    out.append(f"{name}_bucket{_labels(**labels, le='+Inf')} {histogram.total}")
    out.append(f"{name}_sum{_labels(**labels)} {histogram.sum}")
    out.append(f"{name}_count{_labels(**labels)} {histogram.total}")
    return out


def _escape(value: str) -> str:
    """A label value as the text format quotes it (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"
