"""`converge-dsl eval FILE [--baseline RESULTS] [--format human|json|junit|html] [-o PATH]`.

Runs an evaluation file (`*.eval.yaml`, `kind: Evaluation`): every case of its
dataset through the batch scheduler, each result scored by the metrics. Prints
per-metric means (with 95% Wilson intervals for pass/fail metrics), a
confusion matrix for each exact match, the worst cases, the tokens used and
the time taken. `--format json` prints the result document that a later
`--baseline` reads; `--format junit` one testcase per metric; `--format html`
a self-contained page drawn from that document (`pipetest.render_eval_html`). With
`--baseline`, lists per case and metric what improved, regressed (beyond the
file's `tolerance`), is new or gone; a baseline that shares no case or no metric
with the file (another evaluation's) is refused before anything runs.

With `configurations:` in the file, the dataset runs once per configuration
and the metrics are shown side by side; every configuration must meet the
thresholds. `--executor` runs the cases on one event loop (`local`), worker
processes or Ray; `--max-model-calls`/`--max-tokens` cap the whole
evaluation (no case starts once they are spent: those cases are listed as not
run, a failure); `--case-max-model-calls`, `--case-max-tokens`,
`--case-max-wall-s` lower each case's budget. `--cache`/`--offline` answer
model calls (the pipeline's and the judges') from the answer cache as `run`
does. `--record DIR` records every model call of the evaluation into the
folder DIR, the judges' into `DIR/judges.jsonl` and each case's pipeline
models into its own cassette, `DIR/cases/<case>.jsonl`
(`DIR/cases/<configuration>/<case>.jsonl` for declared configurations;
recorded afresh each time); `--replay DIR` answers them all from there, so the
evaluation reruns offline with the same result. The judges' calls count
toward `--max-model-calls`/`--max-tokens` (a call they refuse leaves its case
not judged, CD812, a failure) and are reported apart as well; a case's
`--case-max-*` budget is its pipeline run's and does not cover its judging.
`--otel` exports an `evaluate FILE` span with each judge call under it as a
`chat MODEL` span (the case and the metric as attributes), and each case's run
as its own trace, as `run --cases --otel` does.

Exit codes: 0 thresholds met and no regression; 1 a threshold missed or a
case regressed; 2 the evaluation file (or its dataset or pipeline) is
invalid; 3 usage error (among them an `-o` that is the evaluation file, its
dataset, pipeline or baseline, a link, a device or in a missing folder, said
before any case runs: `cli._output`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.cli import EXIT_FAILURE, EXIT_OK, CommandIO
from converge_dsl.cli._inputs import json_file
from converge_dsl.cli._validate import add_allow_root
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.cli._output import CommandOutput
    from converge_dsl.pipetest import EvalFile, EvalSettings
    from converge_dsl.runtime import CacheSettings

FORMATS = ("human", "json", "junit", "html")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="an evaluation file (*.eval.yaml)")
    parser.add_argument(
        "--baseline",
        metavar="RESULTS",
        help="an earlier `eval --format json` result to compare with",
    )
    parser.add_argument("--format", choices=FORMATS, default="human", help="output format")
    parser.add_argument("-o", "--output", metavar="PATH", help="write the output here")
    parser.add_argument(
        "--concurrency", type=int, default=8, metavar="N", help="cases run at once (default 8)"
    )
    add_allow_root(parser)
    _add_run_options(parser)


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    """How the cases run: executor, budgets, the answer cache, the judges' cassette."""
    group = parser.add_argument_group("running the cases")
    group.add_argument(
        "--executor",
        choices=("local", "process", "ray"),
        default="local",
        help="local: one event loop (default); process: worker processes; ray: Ray actors",
    )
    group.add_argument("--ray-address", metavar="ADDRESS", help="the Ray cluster to run on")
    group.add_argument(
        "--max-model-calls", type=int, metavar="N", help="cap for the whole evaluation"
    )
    group.add_argument("--max-tokens", type=int, metavar="N", help="cap for the whole evaluation")
    group.add_argument("--case-max-model-calls", type=int, metavar="N", help="cap for each case")
    group.add_argument("--case-max-tokens", type=int, metavar="N", help="cap for each case")
    group.add_argument(
        "--case-max-wall-s", type=float, metavar="S", help="wall-time cap for each case"
    )
    group.add_argument(
        "--cache",
        action="store_true",
        help="answer model calls from the answer cache and store new answers",
    )
    group.add_argument(
        "--offline",
        action="store_true",
        help="answer model calls only from the answer cache; a miss is an error",
    )
    group.add_argument("--cache-dir", type=Path, metavar="DIR", help="the answer cache's folder")
    group.add_argument(
        "--no-timings",
        action="store_true",
        help="write every wall time as 0, so that reruns print the same bytes",
    )
    group.add_argument(
        "--record",
        type=Path,
        metavar="DIR",
        help="record every model call (the pipeline's, one cassette per case, and the "
        "judges') into the folder DIR",
    )
    group.add_argument(
        "--replay",
        type=Path,
        metavar="DIR",
        help="answer every model call from a folder written by --record",
    )
    group.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry spans: the evaluation with its judges' calls, and each "
        "case's run as its own trace (the OTEL_* variables say where)",
    )
    group.add_argument(
        "--otel-content",
        action="store_true",
        help="with --otel: record prompts and answers in the spans",
    )


def _settings(args: argparse.Namespace, io: CommandIO) -> tuple[EvalSettings, CacheSettings]:
    """The evaluation's `EvalSettings` and cache settings from the command line
    (`UsageError` when they clash)."""
    from converge_dsl.batch import BatchLimits, CaseBudget
    from converge_dsl.pipetest import EvalSettings, JudgeOptions, cassette_folders
    from converge_dsl.runtime import OtelOptions, cache_settings

    for option, value in (
        ("--max-model-calls", args.max_model_calls),
        ("--max-tokens", args.max_tokens),
        ("--case-max-model-calls", args.case_max_model_calls),
        ("--case-max-tokens", args.case_max_tokens),
        ("--case-max-wall-s", args.case_max_wall_s),
        ("--concurrency", args.concurrency),  # 0 or fewer ran one case at a time, unsaid
    ):
        if value is not None and not value > 0:  # `not >`: nan set no cap, silently
            raise UsageError(
                f"{option} must be above 0",
                hint=f"give {option} a number above 0, or leave it out",
                code=codes.ARGUMENTS_REFUSED,
            )
    if args.record is not None and args.replay is not None:
        raise UsageError("--record and --replay cannot be combined", code=codes.ARGUMENTS_REFUSED)
    if args.replay is not None and not args.replay.is_dir():
        raise UsageError(
            f"--replay: {str(args.replay)!r} is not a folder of cassettes",
            hint="record one with `converge-dsl eval FILE --record DIR`",
            code=codes.PATH_NOT_FOUND,
        )
    if args.record is not None and args.record.exists() and not args.record.is_dir():
        raise UsageError(
            f"--record: {str(args.record)!r} is not a folder",
            hint="give --record a new or empty folder (or one an earlier --record wrote)",
            code=codes.OUTPUT_REFUSED,
        )
    if args.ray_address is not None and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray", code=codes.ARGUMENTS_REFUSED)
    if args.otel_content and not args.otel:
        raise UsageError(
            "--otel-content needs --otel", hint="add --otel", code=codes.ARGUMENTS_REFUSED
        )
    env = dict(io.environ)
    # Decided once and handed to the pipeline, so every executor's workers cache alike.
    cache = cache_settings(
        env=env, cache=args.cache, offline=args.offline, cache_dir=args.cache_dir
    )
    caching = cache.caching(lambda line: io.stderr.write(line + "\n"))
    case_budget = None
    if any(
        v is not None
        for v in (args.case_max_model_calls, args.case_max_tokens, args.case_max_wall_s)
    ):
        case_budget = CaseBudget(
            args.case_max_model_calls, args.case_max_tokens, args.case_max_wall_s
        )
    judges_record, cases_record = (None, None)
    if args.record is not None:
        judges_record, cases_record = cassette_folders(args.record)
    judges_replay, cases_replay = (None, None)
    if args.replay is not None:
        judges_replay, cases_replay = cassette_folders(args.replay)
    return EvalSettings(
        concurrency=args.concurrency,
        executor=args.executor,
        limits=BatchLimits(args.max_model_calls, args.max_tokens),
        case_budget=case_budget,
        judges=JudgeOptions(caching=caching, record=judges_record, replay=judges_replay),
        env=env,
        ray_address=args.ray_address,
        record=cases_record,
        replay=cases_replay,
        otel=OtelOptions(
            flag=args.otel,
            content=args.otel_content,
            on_warning=lambda line: io.stderr.write(line + "\n"),
        ),
    ), cache


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.pipetest import read_eval_file

    path = Path(args.file)
    if not path.is_file():
        raise UsageError(
            f"no such file: {args.file}",
            hint="give an evaluation file (*.eval.yaml)",
            code=codes.PATH_NOT_FOUND,
        )
    baseline = _baseline(args.baseline) if args.baseline else None
    try:
        evaluation = read_eval_file(path, env=io.environ, allow_roots=args.allow_root)
    except PipelineInvalid as exc:
        from converge_dsl.cli._render import render

        json_out = args.format == "json"
        render(
            exc.diagnostics,
            "json" if json_out else "human",
            io.stdout if json_out else io.stderr,
            files=1,
            color=not json_out and io.style(io.stderr).color,
        )
        return exc.exit_code  # 2; 3 for a file of another kind (`refuse_other_kind`)
    if baseline is not None:
        _comparable(args.baseline, baseline, evaluation)
    from converge_dsl.cli._output import command_output

    reads = [(path, "the evaluation file"), (evaluation.dataset, "its dataset")]
    reads += [(args.baseline, "the --baseline file")] if args.baseline else []
    reads += [(evaluation.pipeline.path, "its pipeline")]
    with command_output(io, args.output, "-o", "evaluation report", reads) as output:
        return _evaluate(args, io, evaluation, baseline, output)


def _evaluate(
    args: argparse.Namespace,
    io: CommandIO,
    evaluation: EvalFile,
    baseline: dict[str, Any] | None,
    output: CommandOutput,
) -> int:
    """Run the evaluation's configurations and write the result to `output`."""
    from converge_dsl.pipetest import compare, run_configurations

    settings, cache = _settings(args, io)
    if cache != evaluation.pipeline.cache:
        from dataclasses import replace

        evaluation = replace(evaluation, pipeline=evaluation.pipeline.with_cache(cache))
    results = run_configurations(evaluation, settings)
    if args.no_timings:
        results = tuple(result.untimed() for result in results)
    if len(results) > 1:
        return _several(results, baseline, evaluation.tolerance, args, output)
    result = results[0]
    from converge_dsl.pipetest import baseline_of

    before = baseline_of(baseline, result.configuration) if baseline is not None else None
    changes = compare(result, before, evaluation.tolerance) if before is not None else []
    regressed = [c for c in changes if c.verdict == "regressed"]
    if args.format in ("json", "html"):
        document = dict(result.as_json())
        if baseline is not None:
            document["changes"] = _changes_json(changes)
        if args.format == "html":
            from converge_dsl.pipetest import render_eval_html

            text = render_eval_html(document)
        else:
            text = json.dumps(document, indent=2) + "\n"
    elif args.format == "junit":
        from converge_dsl.pipetest import render_eval_junit

        text = render_eval_junit(result)
    else:
        from converge_dsl.frontend import terminal_safe
        from converge_dsl.pipetest import render_eval_human

        # Case names, judges' reasons and errors are the dataset's and the models' text.
        text = terminal_safe(render_eval_human(result, changes if baseline is not None else None))
    output.write(text)
    return EXIT_OK if result.passed and not regressed else EXIT_FAILURE


def _changes_json(changes: Any) -> list[dict[str, Any]]:
    return [
        {
            "case": c.case,
            "metric": c.metric,
            "before": c.before,
            "after": c.after,
            "verdict": c.verdict,
        }
        for c in changes
    ]


def _several(
    results: Any,
    baseline: dict[str, Any] | None,
    tolerance: float,
    args: argparse.Namespace,
    output: CommandOutput,
) -> int:
    """Several configurations: each compared with the baseline's of its name, side by side."""
    from converge_dsl.pipetest import (
        baseline_of,
        compare,
        render_configurations_human,
        render_configurations_junit,
    )

    changes = {
        r.configuration: compare(r, baseline_of(baseline, r.configuration), tolerance)
        for r in results
        if baseline is not None
    }
    regressed = any(c.verdict == "regressed" for found in changes.values() for c in found)
    if args.format in ("json", "html"):
        configurations = []
        for r in results:
            document = dict(r.as_json())
            if baseline is not None:
                document["changes"] = _changes_json(changes[r.configuration])
            configurations.append(document)
        whole = {
            "evaluation": results[0].evaluation,
            "passed": all(r.passed for r in results),
            "configurations": configurations,
        }
        if args.format == "html":
            from converge_dsl.pipetest import render_eval_html

            text = render_eval_html(whole)
        else:
            text = json.dumps(whole, indent=2) + "\n"
    elif args.format == "junit":
        text = render_configurations_junit(results)
    else:
        from converge_dsl.frontend import terminal_safe

        text = terminal_safe(
            render_configurations_human(results, changes if baseline is not None else None)
        )
    output.write(text)
    return EXIT_OK if all(r.passed for r in results) and not regressed else EXIT_FAILURE


def _comparable(named: str, baseline: dict[str, Any], evaluation: EvalFile) -> None:
    """Refuse a baseline that shares no case or no metric with `evaluation` (another
    evaluation's result): every score of both would be listed as new or gone."""
    parts = baseline.get("configurations") or [baseline]
    cases = [c for p in parts if isinstance(p, dict) for c in p.get("cases") or ()]
    names = {str(c.get("name")) for c in cases if isinstance(c, dict)}
    metrics = {str(m) for c in cases if isinstance(c, dict) for m in c.get("scores") or ()}
    if not names:
        return  # an empty result: every score is new, as documented
    lacking = [
        what
        for what, theirs, ours in (
            ("case", names, {c.name for c in evaluation.cases}),
            ("metric", metrics, {m.name for m in evaluation.metrics}),
        )
        if not theirs & ours
    ]
    if lacking:
        of = baseline.get("evaluation")
        raise UsageError(
            f"baseline {named} shares no {' and no '.join(lacking)} with {evaluation.display}"
            f"{f' (it is a result of {of})' if isinstance(of, str) else ''}: nothing would be "
            "compared",
            hint=f"write this evaluation's baseline with `eval {evaluation.display} --format "
            "json -o PATH`",
            code=codes.FILE_UNREADABLE,
        )


def _baseline(named: str) -> dict[str, Any]:
    data = json_file(Path(named), "baseline")
    problem = _baseline_problem(data)
    if problem is not None:
        raise UsageError(
            f"baseline {named} is not an evaluation result: {problem}",
            hint="write one with `eval FILE --format json -o PATH`",
            code=codes.FILE_UNREADABLE,
        )
    return data  # type: ignore[no-any-return]


def _baseline_problem(data: object) -> str | None:
    """What keeps `data` from being an `eval --format json` result that `compare` can read
    (at its JSON pointer), or None; a result edited by hand made `compare` raise."""
    from converge_dsl._json_pointer import pointer

    if not isinstance(data, dict):
        return "it is not a JSON object"
    several = data.get("configurations")
    if isinstance(several, list):
        parts: list[tuple[tuple[object, ...], object]] = [
            (("configurations", number), part) for number, part in enumerate(several)
        ]
    elif "cases" in data:
        parts = [((), data)]
    else:
        return "it has no `cases`"
    for at, part in parts:
        cases = part.get("cases") if isinstance(part, dict) else None
        if not isinstance(cases, list):
            return f"{pointer((*at, 'cases'))} is not a list"
        for number, case in enumerate(cases):
            where = (*at, "cases", number)
            if not isinstance(case, dict) or not isinstance(case.get("name"), str):
                return f"{pointer(where)} is not a case with a `name`"
            scores = case.get("scores") or {}  # as `compare` reads it
            if not isinstance(scores, dict):
                return f"{pointer((*where, 'scores'))} is not an object"
            for metric, value in scores.items():
                if value is not None and not _finite(value):
                    return f"{pointer((*where, 'scores', metric))} is not a score (a number)"
    return None


def _finite(value: object) -> bool:
    """Whether `value` is a JSON number `compare` can subtract from: finite, and an
    integer within a float's range (`compare` overflowed on 10**400)."""
    import math

    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False
