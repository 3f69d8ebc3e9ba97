"""`converge-dsl run PIPELINE --cases cases.jsonl --out results.jsonl`: a batch run.

Each line of `--cases` is the inputs of one case (a JSON object, optionally
with an `id`); each case's run result is one line of `--out`, written and
flushed as the case finishes, tagged with the case's 0-based `index` and its
`id` (lines are in the order cases finish: sort by `index` for input order).
`--resume` skips the cases `--out` already holds (a last line cut short by a
kill is dropped) and appends; without it `--out` starts empty. A case that
fails is a line like any other. `--max-model-calls` / `--max-tokens` cap the
usage of every case together (each case keeps its pipeline's own budget too).
`--executor local` (default) runs `--concurrency` cases (16) at once on one
event loop; `process` runs `--concurrency` worker processes (one per CPU;
never more than cases to run, and over 1,024 is refused: `BatchOptions.workers`);
`ray` runs async Ray actors (the `ray` extra; `--ray-address` joins a cluster).
The answer cache (`--cache`, `--offline`, `--cache-dir`, `--config`, the
environment) is decided once here and given to every executor alike, so all
cases share one store; `--explain-cache` says per case, at the end, what hit
and what missed and why (`_batch_view.CacheExplainer`, docs/cache.md).

Outputs per case (`converge_dsl.batch._outputs`): `--trace DIR` writes
`DIR/<index>.jsonl`, `--report R.html` a batch page linking `R/<index>.html`,
`--otel` exports each case as its own trace; `--record DIR` records each
case's model calls into its own cassette, `DIR/<id>.jsonl` (a case without an
id: `DIR/<index>.jsonl`; a cassette already there is refused without
`--overwrite`), and `--replay DIR` answers each case from its own, offline
(`converge_dsl.batch._cassettes`). `--checkpoint`, `--input` and the decisions
of a paused run are refused, each with its reason (`_SINGLE_RUN_ONLY`).

Progress goes to standard error: a live bar on a terminal (cases done, rate,
ETA, stop reasons), a plain line per tenth of the batch otherwise; a summary
table at the end (`--format json`: one JSON object on standard output).
Exit 0 when every case converged, 1 when some did not, 2/3 when the batch
could not start (an invalid pipeline, a bad option or cases file; 3 for a case
giving an input the pipeline does not declare, CD802, checked before any case runs).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.batch import BatchSummary
    from converge_dsl.cli import CommandIO

_INPUTS_HINT = "put each case's inputs on its line of the cases file"
_ONE_RUN_HINT = "run that case alone: converge-dsl run PIPELINE --input NAME=VALUE ..."
# Options of a single run that a batch does not take: (attribute, option, why, hint).
_SINGLE_RUN_ONLY = (
    ("input", "--input", "is an option of a single run, not of a batch (--cases)", _INPUTS_HINT),
    ("inputs", "--inputs", "is an option of a single run, not of a batch (--cases)", _INPUTS_HINT),
    (
        "checkpoint",
        "--checkpoint",
        "saves one run to continue it; a batch is continued with --resume, which "
        "skips the cases --out already holds",
        "drop --checkpoint; after a stop, re-run the batch with --resume",
    ),
    (
        "approve",
        "--approve",
        "decides a paused single run; a batch case that pauses ends as hitl_pause",
        _ONE_RUN_HINT,
    ),
    (
        "reject",
        "--reject",
        "decides a paused single run; a batch case that pauses ends as hitl_pause",
        _ONE_RUN_HINT,
    ),
    (
        "decisions",
        "--decisions",
        "decides a paused single run; a batch case that pauses ends as hitl_pause",
        _ONE_RUN_HINT,
    ),
    ("model", "--model", "is an option of a single run, not of a batch (--cases)", _ONE_RUN_HINT),
)


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a batch run (`--cases` makes `run` a batch)."""
    group = parser.add_argument_group("batch runs (one pipeline over many inputs)")
    group.add_argument("--cases", type=Path, metavar="CASES.jsonl", help="one inputs object a line")
    group.add_argument("--out", type=Path, metavar="RESULTS.jsonl", help="one result a line")
    group.add_argument("--concurrency", type=int, metavar="N", help="cases (or workers) at once")
    group.add_argument(
        "--executor",
        choices=("local", "process", "ray"),
        default="local",
        help="local: one event loop (default); process: worker processes; ray: Ray actors",
    )
    group.add_argument("--max-model-calls", type=int, metavar="N", help="cap for the whole batch")
    group.add_argument("--max-tokens", type=int, metavar="N", help="cap for the whole batch")
    group.add_argument("--ray-address", metavar="ADDRESS", help="the Ray cluster to run on")


def _check(args: argparse.Namespace) -> None:
    """Refuse what a batch cannot take (`UsageError`)."""
    if args.out is None:
        raise UsageError(
            "--cases needs --out RESULTS.jsonl",
            hint="name the results file",
            code=codes.ARGUMENTS_REFUSED,
        )
    for name, option, why, hint in _SINGLE_RUN_ONLY:
        if getattr(args, name, None):
            raise UsageError(f"{option} {why}", hint=hint, code=codes.ARGUMENTS_REFUSED)
    if args.otel_content and not args.otel:
        raise UsageError(
            "with --cases, --otel-content needs --otel",
            hint="add --otel",
            code=codes.ARGUMENTS_REFUSED,
        )
    if args.resume not in (None, True):
        raise UsageError(
            "with --cases, --resume takes no folder: it continues the batch in --out",
            hint="use --resume alone",
            code=codes.ARGUMENTS_REFUSED,
        )
    for option, value in (
        ("--max-model-calls", args.max_model_calls),
        ("--max-tokens", args.max_tokens),
        ("--concurrency", args.concurrency),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{option} must be at least 1", code=codes.ARGUMENTS_REFUSED)
    if args.ray_address is not None and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray", code=codes.ARGUMENTS_REFUSED)
    if args.record is not None and args.replay is not None:
        raise UsageError(
            "--record and --replay cannot be combined",
            hint="record the batch with --record DIR, then replay it with --replay DIR",
            code=codes.ARGUMENTS_REFUSED,
        )
    if args.overwrite and args.record is None:
        raise UsageError(
            "--overwrite only applies to --record",
            hint="add --record DIR",
            code=codes.ARGUMENTS_REFUSED,
        )


def execute_batch(args: argparse.Namespace, io: CommandIO) -> int:
    """Run the batch; progress on stderr, the summary at the end."""
    from converge_dsl.batch import BatchLimits, BatchOptions, CaseOutputs, CaseResult, run_batch
    from converge_dsl.cli._batch_view import (
        CacheExplainer,
        Progress,
        summary_json,
        summary_table,
    )
    from converge_dsl.cli._cache_options import cache_settings

    _check(args)
    outputs = CaseOutputs(
        trace=args.trace,
        report=args.report,
        otel=args.otel,
        otel_content=args.otel_content,
        record=args.record,
        overwrite=args.overwrite,
        env=dict(io.environ),
    )
    options = BatchOptions(
        pipeline=args.pipeline,
        cases=args.cases,
        out=args.out,
        executor=args.executor,
        concurrency=args.concurrency,
        resume=args.resume is True,
        limits=BatchLimits(args.max_model_calls, args.max_tokens),
        allow_roots=tuple(args.allow_root),
        ray_address=args.ray_address,
        report=args.report,
        outputs=outputs,
        cache=cache_settings(args, io.environ),
        env=dict(io.environ),
        replay=args.replay,
    )
    progress = Progress(io.stderr, io.style(io.stderr), io.environ, quiet=io.verbosity < 0)
    explainer = CacheExplainer() if args.explain_cache else None

    def finished(result: CaseResult, summary: BatchSummary) -> None:
        if explainer is not None:
            explainer.add(result)
        progress.update(result, summary)

    try:
        summary = run_batch(options, on_result=finished, on_start=progress.start)
    finally:
        progress.stop()
    if explainer is not None:
        explainer.write(io.stderr, as_json=args.format == "json")
    if args.format == "json":
        io.stdout.write(json.dumps(summary_json(summary), indent=2) + "\n")
    else:
        summary_table(summary, options.out, io.stdout, io.style(io.stdout), io.environ)
    return summary.exit_code
