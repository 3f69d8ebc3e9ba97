"""Running an evaluation: `run_eval(evaluation)` -> `EvalResult`, `compare(result, baseline)`.

The dataset's cases run through the batch machinery (`converge_dsl.batch`'s
scheduler, `concurrency` cases at a time, each case's failure its own result);
each result is scored by every metric (`_eval_metrics.score`). A metric's
aggregate is the mean score over the cases it applies to, with the 95% Wilson
interval when every score is a pass or a fail; it passes when the mean reaches
its threshold. The evaluation passes when every metric does and the mean of
the metrics' means reaches the overall threshold.

`compare` reads a baseline (the `as_json()` of an earlier result) and sorts
each (case, metric) into improved, regressed (fell by more than the
evaluation's tolerance), new or gone.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from converge_dsl._json_types import JsonObject

from ._eval_metrics import field_values, score, wilson
from ._eval_spec import EvalFile, Metric


@dataclass(frozen=True, slots=True)
class CaseScores:
    """One case's scores by metric name (None: the metric does not apply) and its run."""

    name: str
    scores: Mapping[str, float | None]
    stop_reason: str
    input_tokens: int
    output_tokens: int

    @property
    def mean(self) -> float:
        given = [s for s in self.scores.values() if s is not None]
        return sum(given) / len(given) if given else 1.0


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One metric over the cases: mean score, how many cases, interval, pass."""

    metric: str
    mean: float
    cases: int
    interval: tuple[float, float] | None
    threshold: float | None
    passed: bool
    # (expected, found) -> count, for exact matches of a categorical field
    confusion: Mapping[tuple[str, str], int]


@dataclass(frozen=True, slots=True)
class EvalResult:
    evaluation: str
    cases: tuple[CaseScores, ...]
    aggregates: tuple[Aggregate, ...]
    overall: float
    threshold: float | None
    seconds: float

    @property
    def passed(self) -> bool:
        overall = self.threshold is None or self.overall >= self.threshold
        return overall and all(a.passed for a in self.aggregates)

    def worst(self, count: int = 5) -> list[CaseScores]:
        return sorted(self.cases, key=lambda c: (c.mean, c.name))[:count]

    def as_json(self) -> JsonObject:
        return {
            "evaluation": self.evaluation,
            "passed": self.passed,
            "overall": self.overall,
            "threshold": self.threshold,
            "seconds": self.seconds,
            "usage": {
                "input_tokens": sum(c.input_tokens for c in self.cases),
                "output_tokens": sum(c.output_tokens for c in self.cases),
            },
            "metrics": [
                {
                    "name": a.metric,
                    "mean": a.mean,
                    "cases": a.cases,
                    "interval": list(a.interval) if a.interval else None,
                    "threshold": a.threshold,
                    "passed": a.passed,
                    "confusion": [
                        {"expected": e, "found": f, "count": n} for (e, f), n in a.confusion.items()
                    ],
                }
                for a in self.aggregates
            ],
            "cases": [
                {"name": c.name, "stop_reason": c.stop_reason, "scores": dict(c.scores)}
                for c in self.cases
            ],
        }


def run_eval(
    evaluation: EvalFile,
    *,
    concurrency: int = 8,
    clock: Callable[[], float] = time.perf_counter,
) -> EvalResult:
    """Run every case of `evaluation` and score it (see the module docstring)."""
    from converge_dsl.batch import drive, ordered

    started = clock()
    pipeline = evaluation.pipeline
    inputs = [dict(case.inputs) for case in evaluation.cases]
    stream = ordered(pipeline, enumerate(inputs), concurrency=concurrency)
    scored: list[CaseScores] = []
    confusion: dict[str, Counter[tuple[str, str]]] = {m.name: Counter() for m in evaluation.metrics}
    for index, result in drive(pipeline, stream):
        case = evaluation.cases[index]
        body = result.body
        scores = {m.name: score(m, case, body) for m in evaluation.metrics}
        for metric in evaluation.metrics:
            _count(confusion[metric.name], metric, case.expected, body)
        usage = body.get("usage") or {}
        scored.append(
            CaseScores(
                case.name,
                scores,
                str(body.get("stop_reason", "error")),
                int(usage.get("input_tokens", 0)),
                int(usage.get("output_tokens", 0)),
            )
        )
    aggregates = tuple(_aggregate(m, scored, confusion[m.name]) for m in evaluation.metrics)
    overall = sum(a.mean for a in aggregates) / len(aggregates) if aggregates else 1.0
    return EvalResult(
        evaluation.display,
        tuple(scored),
        aggregates,
        overall,
        evaluation.threshold,
        clock() - started,
    )


def _count(
    counter: Counter[tuple[str, str]],
    metric: Metric,
    expected: Mapping[str, Any],
    body: Mapping[str, Any],
) -> None:
    if metric.kind != "exact":
        return
    wanted = expected.get(str(metric.spec["expected"]))
    if not isinstance(wanted, str | int | bool) or wanted is None:
        return
    found = field_values(body, str(metric.spec["key"]), str(metric.spec.get("field", "")))
    counter[(str(wanted), str(found[0]) if found else "(none)")] += 1


def _aggregate(
    metric: Metric, cases: Sequence[CaseScores], confusion: Counter[tuple[str, str]]
) -> Aggregate:
    given = [c.scores[metric.name] for c in cases if c.scores[metric.name] is not None]
    values = [float(s) for s in given if s is not None]
    mean = sum(values) / len(values) if values else 1.0
    binary = all(v in (0.0, 1.0) for v in values)
    interval = wilson(sum(values), len(values)) if binary else None
    passed = metric.threshold is None or mean >= metric.threshold
    return Aggregate(
        metric.name, mean, len(values), interval, metric.threshold, passed, dict(confusion)
    )


@dataclass(frozen=True, slots=True)
class Change:
    case: str
    metric: str
    before: float | None
    after: float | None
    verdict: str  # improved, regressed, new, gone


def compare(result: EvalResult, baseline: Mapping[str, Any], tolerance: float) -> list[Change]:
    """Every (case, metric) whose score moved, appeared or went, against `baseline`."""
    before: dict[tuple[str, str], float | None] = {
        (str(case["name"]), str(metric)): value
        for case in baseline.get("cases", [])
        for metric, value in (case.get("scores") or {}).items()
    }
    after: dict[tuple[str, str], float | None] = {
        (case.name, metric): value for case in result.cases for metric, value in case.scores.items()
    }
    changes: list[Change] = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if key not in before:
            changes.append(Change(*key, None, new, "new"))
        elif key not in after:
            changes.append(Change(*key, old, None, "gone"))
        elif old is not None and new is not None and new < old - tolerance:
            changes.append(Change(*key, old, new, "regressed"))
        elif old is not None and new is not None and new > old:
            changes.append(Change(*key, old, new, "improved"))
    return changes
