"""`converge-dsl eval FILE [--baseline RESULTS] [--format human|json] [-o PATH]`.

Runs an evaluation file (`*.eval.yaml`, `kind: Evaluation`): every case of its
dataset through the batch scheduler, each result scored by the metrics. Prints
per-metric means (with 95% Wilson intervals for pass/fail metrics), a
confusion matrix for each exact match, the worst cases, the tokens used and
the time taken. `--format json` prints the result document that a later
`--baseline` reads. With `--baseline`, lists per case and metric what
improved, regressed (beyond the file's `tolerance`), is new or gone.

Exit codes: 0 thresholds met and no regression; 1 a threshold missed or a
case regressed; 2 the evaluation file (or its dataset or pipeline) is
invalid; 3 usage error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, CommandIO
from converge_dsl.cli._validate import add_allow_root
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.pipetest._eval_run import Change, EvalResult

FORMATS = ("human", "json")


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


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.pipetest._eval_run import compare, run_eval
    from converge_dsl.pipetest._eval_spec import read_eval_file

    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"no such file: {args.file}", hint="give an evaluation file (*.eval.yaml)")
    baseline = _baseline(args.baseline) if args.baseline else None
    try:
        evaluation = read_eval_file(path, allow_roots=args.allow_root)
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
        return EXIT_INVALID
    result = run_eval(evaluation, concurrency=max(1, args.concurrency))
    changes = compare(result, baseline, evaluation.tolerance) if baseline is not None else []
    regressed = [c for c in changes if c.verdict == "regressed"]
    if args.format == "json":
        document = dict(result.as_json())
        if baseline is not None:
            document["changes"] = [
                {
                    "case": c.case,
                    "metric": c.metric,
                    "before": c.before,
                    "after": c.after,
                    "verdict": c.verdict,
                }
                for c in changes
            ]
        text = json.dumps(document, indent=2) + "\n"
    else:
        text = render_human(result, changes if baseline is not None else None)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc.strerror}") from None
    else:
        io.stdout.write(text)
    return EXIT_OK if result.passed and not regressed else EXIT_FAILURE


def _baseline(named: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(named).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read baseline {named}: {exc.strerror}") from None
    except ValueError:
        raise UsageError(
            f"baseline {named} is not JSON", hint="write one with `eval FILE --format json -o PATH`"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise UsageError(
            f"baseline {named} is not an evaluation result",
            hint="write one with `eval FILE --format json -o PATH`",
        )
    return data


def render_human(result: EvalResult, changes: list[Change] | None) -> str:
    lines = [f"{result.evaluation}: {len(result.cases)} cases"]
    for a in result.aggregates:
        interval = f" [{a.interval[0]:.3f}, {a.interval[1]:.3f}]" if a.interval else ""
        bar = f" (threshold {a.threshold:g})" if a.threshold is not None else ""
        mark = "ok  " if a.passed else "FAIL"
        lines.append(f"  {mark} {a.metric}: {a.mean:.3f}{interval} over {a.cases} cases{bar}")
    for a in result.aggregates:
        if a.confusion:
            lines.extend(_confusion(a.metric, a.confusion))
    worst = [case for case in result.worst() if case.mean < 1.0]
    lines.append("worst cases:" if worst else "worst cases: none, every case scored 1")
    for case in worst:
        failed = ", ".join(m for m, s in case.scores.items() if s is not None and s < 1.0)
        lines.append(f"  {case.name}: {case.mean:.3f}" + (f" ({failed})" if failed else ""))
    tokens_in = sum(c.input_tokens for c in result.cases)
    tokens_out = sum(c.output_tokens for c in result.cases)
    lines.append(f"usage: {tokens_in} input tokens, {tokens_out} output tokens")
    lines.append(f"time: {result.seconds:.2f}s")
    overall = f"overall: {result.overall:.3f}"
    if result.threshold is not None:
        overall += f" (threshold {result.threshold:g})"
    lines.append(f"{overall}: {'passed' if result.passed else 'FAILED'}")
    if changes is not None:
        lines.append("against the baseline:")
        if not changes:
            lines.append("  no change")
        for c in changes:
            before = "-" if c.before is None else f"{c.before:.3f}"
            after = "-" if c.after is None else f"{c.after:.3f}"
            lines.append(f"  {c.verdict}: {c.case} / {c.metric}: {before} -> {after}")
    return "\n".join(lines) + "\n"


def _confusion(metric: str, cells: Any) -> list[str]:
    expected = sorted({e for e, _ in cells})
    found = sorted({f for _, f in cells} | set(expected))
    width = max(len(x) for x in [*found, *expected, "expected"]) + 2
    lines = [f"confusion of {metric} (rows expected, columns found):"]
    lines.append("  " + "".ljust(width) + "".join(f.rjust(width) for f in found))
    for e in expected:
        row = "".join(str(cells.get((e, f), 0)).rjust(width) for f in found)
        lines.append("  " + e.ljust(width) + row)
    return lines
