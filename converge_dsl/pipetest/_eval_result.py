"""An evaluation's result: `EvalResult` (one configuration's: its cases' scores,
`CaseScores`, and each metric's `Aggregate`) and its JSON document (`as_json`: what
`--format json` prints and `--baseline` reads). `_eval_run` makes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from converge_dsl._json_types import JsonObject

from ._eval_spec import DEFAULT_CONFIGURATION

if TYPE_CHECKING:
    from converge_dsl.diagnostics import Diagnostic

__all__ = ["Aggregate", "CaseScores", "EvalResult"]


@dataclass(frozen=True, slots=True)
class CaseScores:
    """One case's scores by metric name (None: the metric does not apply) and its run:
    stop reason, usage, wall time (`seconds`, the one value that differs between
    reruns) and each judge's reason by metric."""

    name: str
    scores: Mapping[str, float | None]
    stop_reason: str
    input_tokens: int
    output_tokens: int
    seconds: float = 0.0
    reasons: Mapping[str, str] = field(default_factory=dict)
    model_calls: int = 0
    error: str | None = None  # why its run stopped with `error` (its first error diagnostic)
    # that diagnostic's fields (code, message, file, line, column, hint, suggestor, cycle):
    # what the HTML page shows as `run` prints it
    diagnostic: Mapping[str, Any] | None = None
    # what it expected of its run and did not get (a refusal, and the run stopped)
    failed_expectation: str | None = None

    @property
    def mean(self) -> float:
        """Its scores' mean; 0 when it failed its expectation (a refusal, measured by
        that alone: no metric may score it)."""
        if self.failed_expectation is not None:
            return 0.0
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
    """One configuration's evaluation. `problems`: judges' bad verdicts, failed and
    refused calls (located diagnostics); `not_run`: cases never started, the
    evaluation's caps spent; `not_judged`: (case, metric) a judge call the caps refused
    left without a score; a case whose run stopped with an error (`errors()`), a case
    that failed what it expected of its run (`failed_expectations()`). Any fails the
    evaluation."""

    evaluation: str
    cases: tuple[CaseScores, ...]
    aggregates: tuple[Aggregate, ...]
    overall: float
    threshold: float | None
    seconds: float
    configuration: str = DEFAULT_CONFIGURATION
    problems: tuple[Diagnostic, ...] = ()
    not_run: tuple[str, ...] = ()
    # The judges' (model calls, input tokens, output tokens), outside the cases' usage.
    judge_usage: tuple[int, int, int] = (0, 0, 0)
    not_judged: tuple[tuple[str, str], ...] = ()

    @property
    def passed(self) -> bool:
        overall = self.threshold is None or self.overall >= self.threshold
        broken = self.problems or self.not_run or self.not_judged or self.errors()
        broken = broken or self.failed_expectations()
        return overall and not broken and all(a.passed for a in self.aggregates)

    def untimed(self) -> EvalResult:
        """This result with every wall time 0 (`eval --no-timings`): two runs of a
        deterministic evaluation then print the same bytes."""
        from dataclasses import replace

        cases = tuple(replace(case, seconds=0.0) for case in self.cases)
        return replace(self, cases=cases, seconds=0.0)

    def errors(self) -> list[CaseScores]:
        """The cases whose run stopped with an error (their scores measure no answer)."""
        return [case for case in self.cases if case.error is not None]

    def failed_expectations(self) -> list[CaseScores]:
        """The cases that failed what they expected of their run (a refusal that ran)."""
        return [case for case in self.cases if case.failed_expectation is not None]

    def worst(self, count: int = 5) -> list[CaseScores]:
        return sorted(self.cases, key=lambda c: (c.mean, c.name))[:count]

    def as_json(self) -> JsonObject:
        """The result document (`--format json`, what `--baseline` reads). `seconds`
        (overall and per case) are wall times: the only values that differ between
        two runs of a deterministic evaluation."""
        extra: dict[str, Any] = {}
        if self.configuration != DEFAULT_CONFIGURATION:
            extra["configuration"] = self.configuration
        if self.problems:
            extra["problems"] = [
                {
                    "code": d.code,
                    "message": d.message,
                    "file": d.file,
                    "line": d.line,
                    "column": d.column,
                    "hint": d.hint,
                }
                for d in self.problems
            ]
        if self.not_run:
            extra["not_run"] = list(self.not_run)
        if self.not_judged:
            extra["not_judged"] = [{"case": c, "metric": m} for c, m in self.not_judged]
        if any(self.judge_usage):
            calls, tokens_in, tokens_out = self.judge_usage
            extra["judge_usage"] = {
                "model_calls": calls,
                "input_tokens": tokens_in,
                "output_tokens": tokens_out,
            }
        return {
            **extra,
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
            "cases": [_case_json(c) for c in self.cases],
        }


def _case_json(case: CaseScores) -> JsonObject:
    out: dict[str, Any] = {
        "name": case.name,
        "stop_reason": case.stop_reason,
        "scores": dict(case.scores),
        "seconds": case.seconds,
    }
    if case.reasons:
        out["reasons"] = dict(case.reasons)
    if case.error is not None:
        out["error"] = case.error
    if case.failed_expectation is not None:
        out["failed_expectation"] = case.failed_expectation
    if case.diagnostic is not None:
        out["diagnostic"] = dict(case.diagnostic)
    return out
