"""Running an evaluation: `run_configurations(evaluation, settings)` -> one `EvalResult`
per model configuration (`run_eval`: the first's); `_eval_compare` compares one with a
baseline.

The dataset's cases run through the batch machinery once per configuration
(`converge_dsl.batch`: the local scheduler, `concurrency` cases at a time, or
`run_cases` on the `process` or `ray` executor; each case's failure its own
result, each run with its configuration's models, `ModelOverride`, and the
per-case budget, `CaseBudget`); each result is scored by every metric
(`_eval_metrics.score`, a judge metric by its judge, `_eval_judge`). The
evaluation's own caps (`EvalSettings.limits`) count every case's usage
together: once they are spent no further case is started (`not_run`, a
failure), on the local executor; the others start every case and the spent
cap refuses their model calls. The judges' calls count toward the same caps
(`_eval_judge`: a call they refuse leaves its case not judged, a failure);
a case's own budget is its pipeline run's alone. With `record` (`eval --record
DIR`) each case's pipeline models are recorded into its own cassette, with
`replay` answered from it (`_eval_outputs` says where; with `otel` the judges'
calls are spans). A metric's
aggregate is the mean score over the cases it applies to, with the 95% Wilson
interval when every score is a pass or a fail; it passes when the mean reaches
its threshold. The evaluation passes when every metric does and the overall
score reaches the overall threshold: the mean of the metrics' means, each counting a
case that failed its expectation as a 0 (`_overall`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl.clock import SystemClock
from converge_dsl.diagnostics import location

from ._eval_dataset import refused
from ._eval_judge import JudgeOptions, Judges, Verdict
from ._eval_metrics import field_values, score, wilson
from ._eval_outputs import case_outputs, case_sinks, cassettes_of, evaluation_spans
from ._eval_result import Aggregate, CaseScores, EvalResult
from ._eval_spec import DEFAULT_CONFIGURATION, Configuration, EvalFile, Metric

if TYPE_CHECKING:
    from converge_dsl.batch import BatchLimits, Case, CaseBudget, CaseResult, LocalPool
    from converge_dsl.diagnostics import Diagnostic
    from converge_dsl.errors import UsageError
    from converge_dsl.runtime import OtelOptions


@dataclass(frozen=True)
class EvalSettings:
    """How an evaluation runs: cases at once, the executor (`local`, `process`, `ray`),
    the evaluation's own caps over every case (`limits`), each case's budget, and where
    the judges' answers come from (`judges`)."""

    concurrency: int = 8
    executor: str = "local"
    limits: BatchLimits | None = None
    case_budget: CaseBudget | None = None
    judges: JudgeOptions = field(default_factory=JudgeOptions)
    env: Mapping[str, str] | None = None
    ray_address: str | None = None
    # The folders of the pipeline models' cassettes, one per case (`cassette_folders`).
    record: Path | None = None
    replay: Path | None = None
    # `--otel`: the evaluation's span with its judges' calls, each case's run its own trace.
    otel: OtelOptions | None = None


_DIAGNOSTIC_FIELDS = ("code", "message", "file", "line", "column", "hint", "suggestor", "cycle")


_FAILED_RUNS = ("error", "invalid", "usage_error")  # the run-result's stop reasons of a failure


def _run_error(
    body: Mapping[str, Any], expected: Collection[str] = (), refusal: bool = False
) -> tuple[str | None, dict[str, Any] | None]:
    """Why a case's run stopped with `error` (or never started: `invalid`, `usage_error`,
    which an evaluation passed silently), from its first error diagnostic: that diagnostic
    located on one line, and its fields that are given (None, None for a run that stopped
    for another reason, or for a stop reason in `expected`: one a `stop_reason` metric of
    the evaluation asks for, so the evaluation measures it and scores it; a text and None
    for one without such a diagnostic). A case expecting its run to be refused
    (`refusal`: `expected.stop_reason: usage_error`) passes when it is; stopping with
    another failure is a run error as ever (and fails its expectation, as one that ran:
    `_unmet`)."""
    stop = body.get("stop_reason")
    if stop not in _FAILED_RUNS or stop in expected or (refusal and stop == "usage_error"):
        return None, None
    for each in body.get("diagnostics") or ():
        if isinstance(each, Mapping) and each.get("severity") == "error":
            where = (
                f" (at {location(str(each['file']), each['line'], each['column'])})"
                if each.get("file")
                else ""
            )
            given = {k: each[k] for k in _DIAGNOSTIC_FIELDS if each.get(k) is not None}
            return f"{each.get('code')}: {each.get('message')}{where}", given
    return "the run stopped with an error", None


def _unmet(body: Mapping[str, Any], refusal: bool) -> str | None:
    """What a case expecting its run to be refused (`refusal`) says when the run was not
    refused but stopped, with an error too (None: it was, or it expects no refusal): its
    mean is 0, as no metric scores such a case."""
    stop = body.get("stop_reason")
    if refusal and stop != "usage_error":
        return f"expected its run to be refused (usage_error); it stopped with {stop}"
    return None


def run_eval(
    evaluation: EvalFile,
    *,
    concurrency: int = 8,
    clock: Callable[[], float] = time.perf_counter,
    settings: EvalSettings | None = None,
) -> EvalResult:
    """Run every case of `evaluation` and score it: its first configuration's result
    (see the module docstring; `run_configurations` gives every configuration's)."""
    chosen = settings or EvalSettings(concurrency=concurrency)
    return run_configurations(evaluation, chosen, clock=clock)[0]


def run_configurations(
    evaluation: EvalFile,
    settings: EvalSettings,
    *,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[EvalResult, ...]:
    """One `EvalResult` per configuration of `evaluation`, in their order.

    The evaluation's caps (`settings.limits`) hold for every configuration together,
    the judges' calls included: each runs under what the earlier ones left. The
    judges of every configuration record into one cassette (`--record`).
    """
    import itertools
    from dataclasses import replace

    results: list[EvalResult] = []
    steps = itertools.count(1)  # numbers the recorded judges' calls of the whole evaluation
    limits = settings.limits
    env = dict(os.environ if settings.env is None else settings.env)
    spans = evaluation_spans(evaluation, settings.otel, env)
    try:
        for index, configuration in enumerate(evaluation.configurations):
            judges = Judges(
                evaluation,
                env=env,
                clock=SystemClock(),
                options=settings.judges,
                steps=steps,
                fresh=index == 0,
                spans=spans,
                configuration=None
                if configuration.name == DEFAULT_CONFIGURATION
                else configuration.name,
            )
            left = replace(
                settings,
                limits=limits,
                record=cassettes_of(settings.record, configuration),
                replay=cassettes_of(settings.replay, configuration),
            )
            result = _run_one(evaluation, configuration, left, judges, clock)
            results.append(result)
            limits = _remaining(limits, result)
    finally:
        if spans is not None:
            spans.close()
    return tuple(results)


def _remaining(limits: BatchLimits | None, result: EvalResult) -> BatchLimits | None:
    """What `limits` leave once `result`'s cases ran and were judged (None: no cap)."""
    if limits is None or not limits.any:
        return limits
    from converge_dsl.batch import BatchLimits

    cases = result.cases
    judge_calls, judge_in, judge_out = result.judge_usage
    calls = sum(c.model_calls for c in cases) + judge_calls
    tokens = sum(c.input_tokens + c.output_tokens for c in cases) + judge_in + judge_out
    return BatchLimits(
        None if limits.max_model_calls is None else max(0, limits.max_model_calls - calls),
        None if limits.max_tokens is None else max(0, limits.max_tokens - tokens),
    )


def _run_one(
    evaluation: EvalFile,
    configuration: Configuration,
    settings: EvalSettings,
    judges: Judges,
    clock: Callable[[], float],
) -> EvalResult:
    started = clock()
    not_run: list[str] = []
    scored: list[CaseScores] = []
    problems: list[Diagnostic] = []
    not_judged: list[tuple[str, str]] = []
    confusion: dict[str, Counter[tuple[str, str]]] = {m.name: Counter() for m in evaluation.metrics}
    expected_stops = {str(m.spec["equals"]) for m in evaluation.metrics if m.kind == "stop_reason"}
    for index, result, verdicts in _results(evaluation, configuration, settings, judges):
        case = evaluation.cases[index]
        if result is None:
            not_run.append(case.name)
            continue
        body = result.body
        scores = {m.name: score(m, case, body, result.seconds) for m in evaluation.metrics}
        reasons: dict[str, str] = {}
        for verdict in verdicts:
            scores[verdict.metric] = verdict.score
            reasons[verdict.metric] = verdict.reason
            if verdict.problem is not None:
                problems.append(verdict.problem)
            if verdict.score is None:
                not_judged.append((case.name, verdict.metric))
        for metric in evaluation.metrics if not refused(case) else ():
            _count(confusion[metric.name], metric, case.expected, body)
        usage = body.get("usage") or {}
        scored.append(
            CaseScores(
                case.name,
                scores,
                str(body.get("stop_reason", "error")),
                int(usage.get("input_tokens", 0)),
                int(usage.get("output_tokens", 0)),
                result.seconds,
                reasons,
                int(usage.get("model_calls", 0)),
                *_run_error(body, expected_stops, refused(case)),
                _unmet(body, refused(case)),
            )
        )
    aggregates = tuple(_aggregate(m, scored, confusion[m.name]) for m in evaluation.metrics)
    overall = _overall(evaluation.metrics, scored)
    return EvalResult(
        evaluation.display,
        tuple(scored),
        aggregates,
        overall,
        evaluation.threshold,
        clock() - started,
        configuration.name,
        tuple(problems),
        tuple(not_run),
        (judges.usage[0], judges.usage[1], judges.usage[2]),
        tuple(not_judged),
    )


_Scored = tuple[int, "CaseResult | None", Sequence[Verdict]]


def _cases(
    evaluation: EvalFile, configuration: Configuration, settings: EvalSettings
) -> list[Case]:
    """The dataset's cases as the batch runs them: each with the configuration's models,
    the case budget, located at its dataset line, answered from its own cassette under
    `settings.replay` (a recording there refused first: `_cassettes`)."""
    from converge_dsl._files import display_name
    from converge_dsl.batch import Case, check_cassettes, replaying
    from converge_dsl.diagnostics import SourceSpan

    models = dict(configuration.models) or None
    dataset = display_name(evaluation.dataset)
    declared = evaluation.pipeline.inputs
    cases = [
        Case(
            index,
            case.name,
            dict(case.inputs),
            _undeclared(case.inputs, declared),
            span=SourceSpan(dataset, case.line, 1, case.line, 1),
            models=models,
            budget=settings.case_budget,
        )
        for index, case in enumerate(evaluation.cases)
    ]
    if settings.record is not None:
        check_cassettes(cases, settings.record, option="--record", replay=False)
    if settings.replay is None:
        return cases
    check_cassettes(cases, settings.replay, option="--replay", replay=True)
    return replaying(cases, settings.replay)


def _undeclared(inputs: Mapping[str, Any], declared: Collection[str]) -> UsageError | None:
    """Why a case giving an input the pipeline does not declare is refused (its run's
    `usage_error`, in the run's words), without a run: only a case expecting that
    refusal gives one (any other was refused with the dataset, CD802), and `run_cases`
    would refuse the whole evaluation for it."""
    from converge_dsl.compiler import unknown_input

    unknown = next((name for name in inputs if name not in declared), None)
    return None if unknown is None else unknown_input(unknown, declared)


def _results(
    evaluation: EvalFile, configuration: Configuration, settings: EvalSettings, judges: Judges
) -> Iterator[_Scored]:
    """(index, result or None when never started, verdicts) of every case, in case order."""
    from converge_dsl.batch import drive, ordered

    if settings.executor != "local":
        cases = _cases(evaluation, configuration, settings)
        yield from _elsewhere(evaluation, cases, settings, judges)
        return
    pipeline = evaluation.pipeline
    outputs = case_outputs(settings.record, settings.otel, settings.env)
    outputs.make_folders()  # refused once, before any case runs (as the batch does)
    pool, meter = _pool(settings.limits)
    judges.draw_from(pool)  # the judges' calls count toward the caps with the cases'
    items: Any
    cassettes = settings.record is not None or settings.replay is not None
    if configuration.models or settings.case_budget or pool is not None or cassettes:
        items = _launched(_cases(evaluation, configuration, settings), pool)
    else:  # plain inputs, as `Pipeline.run_many` gives them
        items = enumerate(dict(case.inputs) for case in evaluation.cases)
    stream = ordered(
        pipeline, items, concurrency=settings.concurrency, meter=meter, sinks=case_sinks(outputs)
    )
    if not judges.any and pool is None:
        for index, finished in drive(pipeline, stream):
            yield index, finished, ()
        return
    following = 0
    for index, done, verdicts in drive(pipeline, _judged(evaluation, stream, judges, settings)):
        while following < index:  # skipped: never launched (the caps were spent)
            yield following, None, ()
            following += 1
        yield index, done, verdicts
        following = index + 1
    for index in range(following, len(evaluation.cases)):
        yield index, None, ()


def _launched(cases: list[Case], pool: LocalPool | None) -> Iterator[Case]:
    """The cases, until the evaluation's caps are spent (then none is started)."""
    for case in cases:
        if pool is not None and pool.blocked(1) is not None:
            return
        yield case


def _pool(limits: BatchLimits | None) -> tuple[LocalPool | None, Any]:
    if limits is None or not limits.any:
        return None, None
    from converge_dsl.batch import LocalPool, PooledMeter
    from converge_dsl.clock import SystemClock

    pool = LocalPool(limits)
    clock = SystemClock()
    return pool, lambda budget: PooledMeter(budget, pool, clock=clock)


async def _judged(
    evaluation: EvalFile,
    stream: AsyncIterator[tuple[int, CaseResult]],
    judges: Judges,
    settings: EvalSettings,
) -> AsyncIterator[_Scored]:
    """`stream`'s results with their judges' verdicts, judged `concurrency` cases at a
    time while the later cases run; in the stream's order."""
    window: deque[tuple[int, CaseResult, asyncio.Future[dict[str, Verdict]]]] = deque()
    try:
        async for index, result in stream:
            case = evaluation.cases[index]
            task = asyncio.ensure_future(judges.verdicts(case, result.body))
            window.append((index, result, task))
            while window and (len(window) > settings.concurrency or window[0][2].done()):
                first, done, judging = window.popleft()
                yield first, done, tuple((await judging).values())
        while window:
            first, done, judging = window.popleft()
            yield first, done, tuple((await judging).values())
    finally:
        for _, _, pending in window:
            pending.cancel()
        await judges.aclose()


def _elsewhere(
    evaluation: EvalFile, cases: list[Case], settings: EvalSettings, judges: Judges
) -> Iterator[_Scored]:
    """The cases on the `process` or `ray` executor (`converge_dsl.batch.run_cases`),
    judged here as they come, yielded in case order."""
    from converge_dsl.batch import BatchLimits, BatchOptions, drive, run_cases

    env = dict(os.environ if settings.env is None else settings.env)
    options = BatchOptions(
        pipeline=evaluation.pipeline.path,
        cases=evaluation.dataset,
        out=Path(os.devnull),
        executor=settings.executor,
        concurrency=settings.concurrency,
        limits=settings.limits or BatchLimits(),
        env=env,
        allow_roots=evaluation.roots,
        ray_address=settings.ray_address,
        outputs=case_outputs(settings.record, settings.otel, env),
    )
    results = sorted(run_cases(options, cases), key=lambda r: r.index)
    judges.draw_from(_spent_pool(settings.limits, results))

    async def judged() -> AsyncIterator[_Scored]:
        for result in results:
            verdicts = await judges.verdicts(evaluation.cases[result.index], result.body)
            yield result.index, result, tuple(verdicts.values())

    # Stepped as the local cases are (`batch.drive`): a Ctrl-C cancels the judging.
    yield from drive(judges, judged())


def _spent_pool(limits: BatchLimits | None, results: Sequence[CaseResult]) -> LocalPool | None:
    """The evaluation's caps once `results` ran elsewhere (their usage counted), for the
    judges that follow here (None: no cap)."""
    if limits is None or not limits.any:
        return None
    from converge_dsl.batch import LocalPool

    pool = LocalPool(limits)
    for result in results:
        usage = result.usage
        pool.add(usage["model_calls"], usage["input_tokens"] + usage["output_tokens"], 0, 0)
    return pool


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


def _overall(metrics: Sequence[Metric], cases: Sequence[CaseScores]) -> float:
    """The mean of the metrics' means, each counting a case that failed its expectation
    as one 0 (a case's mean, `CaseScores.mean`): the 0 replaces the metric's score for
    the case, or is added when the metric did not score it. An evaluation whose one
    failure it is must not read 1.000, nor count the failure twice where a metric
    scored it already."""
    failed = any(case.failed_expectation is not None for case in cases)
    if not metrics:
        return 0.0 if failed else 1.0
    means = []
    for metric in metrics:
        values: list[float] = []
        for case in cases:
            given = case.scores.get(metric.name)
            if case.failed_expectation is not None:
                values.append(0.0)
            elif given is not None:
                values.append(given)
        means.append(sum(values) / len(values) if values else 1.0)
    return sum(means) / len(means)


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
