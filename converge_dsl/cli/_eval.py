"""`converge-dsl eval FILE [--baseline RESULTS] [--format human|json|junit|html] [-o PATH]`.

Runs an evaluation file (`*.eval.yaml`, `kind: Evaluation`): every case of its
dataset through the batch scheduler, each result scored by the metrics. Prints
per-metric means (with 95% Wilson intervals for pass/fail metrics), a
confusion matrix for each exact match, the worst cases, the tokens used and
the time taken. `--format json` prints the result document that a later
`--baseline` reads; `--format junit` one testcase per metric; `--format html`
a self-contained page drawn from that document (`pipetest.render_eval_html`). With
`--baseline`, lists per case and metric what improved, regressed (beyond the
file's `tolerance`), is new or gone.

Exit codes: 0 thresholds met and no regression; 1 a threshold missed or a
case regressed; 2 the evaluation file (or its dataset or pipeline) is
invalid; 3 usage error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from converge_dsl.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, CommandIO
from converge_dsl.cli._inputs import json_file
from converge_dsl.cli._validate import add_allow_root
from converge_dsl.errors import UsageError

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


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.pipetest import compare, read_eval_file, run_eval

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
    if args.format in ("json", "html"):
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
        if args.format == "html":
            from converge_dsl.pipetest import render_eval_html

            text = render_eval_html(document)
        else:
            text = json.dumps(document, indent=2) + "\n"
    elif args.format == "junit":
        from converge_dsl.pipetest import render_eval_junit

        text = render_eval_junit(result)
    else:
        from converge_dsl.pipetest import render_eval_human

        text = render_eval_human(result, changes if baseline is not None else None)
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc.strerror}") from None
    else:
        io.stdout.write(text)
    return EXIT_OK if result.passed and not regressed else EXIT_FAILURE


def _baseline(named: str) -> dict[str, Any]:
    data = json_file(Path(named), "baseline")
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise UsageError(
            f"baseline {named} is not an evaluation result",
            hint="write one with `eval FILE --format json -o PATH`",
        )
    return data
