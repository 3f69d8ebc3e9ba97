"""Evaluation benchmark: the overhead of scoring over the batch run alone.

2,000 cases (the 52 labelled tickets of `pipelines/support-triage/`, repeated
under new names) of `ticket.yaml` on its scripted model, `local` scheduling,
8 cases at once. A: the batch run alone (the scheduler's results, consumed);
B: `run_eval` of the same cases with the 5 metrics of `triage.eval.yaml`
(exact, numeric, schema, stop reason, usage; its judged metric left out),
scoring and aggregates included.
Both are measured in this run, best of `--repeat`, loading outside the timed region.

Prints one line:

    batch: A s  eval: B s  overhead ratio: B/A (target <= 1.1)

Usage: python bench/eval.py [--cases N] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "pipelines" / "support-triage"


def _folder(tmp: Path, cases: int) -> Path:
    for name in ("ticket.yaml", "ticket.script.yaml"):
        shutil.copy(EXAMPLE / name, tmp / name)
    # The five metrics without a judge: the judged `summary` metric and `judges:` left out.
    text = (EXAMPLE / "triage.eval.yaml").read_text(encoding="utf-8")
    text = text.split("  - name: summary\n", 1)[0]
    head, rest = text.split("judges:\n", 1)
    text = head + rest.split("\n", 1)[1]
    (tmp / "triage.eval.yaml").write_text(text, encoding="utf-8")
    rows = [json.loads(line) for line in (EXAMPLE / "tickets.jsonl").read_text().splitlines()]
    with (tmp / "tickets.jsonl").open("w", encoding="utf-8") as out:
        for i in range(cases):
            row = dict(rows[i % len(rows)], name=f"case-{i}")
            out.write(json.dumps(row) + "\n")
    return tmp / "triage.eval.yaml"


def main() -> int:
    from converge_dsl.batch import drive, ordered
    from converge_dsl.pipetest import read_eval_file, run_eval

    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        evaluation = read_eval_file(_folder(Path(tmp), args.cases))
        assert len(evaluation.metrics) == 5
        inputs = [dict(case.inputs) for case in evaluation.cases]
        warm = drive(
            evaluation.pipeline, ordered(evaluation.pipeline, enumerate(inputs[:50]), concurrency=8)
        )
        sum(1 for _ in warm)  # templates compiled, schemas cached: outside the timed region
        batch, full = [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            done = sum(
                1
                for _ in drive(
                    evaluation.pipeline,
                    ordered(evaluation.pipeline, enumerate(inputs), concurrency=8),
                )
            )
            batch.append(time.perf_counter() - started)
            assert done == args.cases
            started = time.perf_counter()
            result = run_eval(evaluation, concurrency=8)
            full.append(time.perf_counter() - started)
            assert len(result.cases) == args.cases
        evaluation.pipeline.close()
    a, b = min(batch), min(full)
    print(f"batch: {a:.2f} s  eval: {b:.2f} s  overhead ratio: {b / a:.3f} (target <= 1.1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
