"""Benchmark: `converge-dsl validate` of a rule comparing a data field with many string
literals on one line (`category == 'v0' or category == 'v1' or ...`, a CD304 warning each).

For each count of literals (300, 1,000, 3,000 by default) a pipeline is generated in a
temporary folder and `python -m converge_dsl validate FILE` is timed as a whole process,
the minimum of `--repeat` runs, interleaved by size (and by tree), after one untimed run
of each. With `--other DIR` (a checkout of another commit) the same files are validated
with that tree's package first on the import path too, in the same rounds.

Prints per size the seconds of each tree and the time per literal relative to the
smallest size's (1.0: linear), and with `--other` the ratio this tree / other.
Last line: `literals per-literal 3000/300: X`.

Run: .venv/bin/python bench/validate_literals.py [--sizes 300,1000,3000] [--repeat R]
     [--other DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HEADER = """apiVersion: converge-dsl/v1
kind: Pipeline
name: literals
keys:
  - name: tickets
    schema:
      type: object
      properties:
        category: {enum: [billing, tech, other]}
seeds:
  - {id: t1, key: tickets, content: a ticket}
suggestors:
  - name: r
    kind: rule
    dependencies: [tickets]
"""


def _pipeline(literals: int) -> str:
    when = " or ".join(f"facts.tickets[0].data.category == 'v{n}'" for n in range(literals))
    return _HEADER + f'    when: "{when}"\n    emit: [{{key: tickets, id: s, content: c}}]\n'


def _seconds(file: Path, tree: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, "-m", "converge_dsl", "validate", str(file)]
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=file.parent, capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300,1000,3000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--other", type=Path, help="a checkout of another commit")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    trees = {"this": Path(__file__).resolve().parent.parent}
    if args.other is not None:
        trees["other"] = args.other.resolve()
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for size in sizes:
            files[size] = Path(folder) / str(size) / "pipeline.yaml"
            files[size].parent.mkdir()
            files[size].write_text(_pipeline(size), encoding="utf-8")
        best = {(name, size): float("inf") for name in trees for size in sizes}
        for round_ in range(args.repeat + 1):
            for size in sizes:
                for name, tree in trees.items():
                    seconds = _seconds(files[size], tree)
                    if round_:  # the first round warms up
                        best[name, size] = min(best[name, size], seconds)
    print(f"{'literals':>9} " + " ".join(f"{name + ' s':>9}" for name in trees), end="")
    print(f" {'per-literal/first':>18}" + (f" {'this/other':>11}" if "other" in trees else ""))
    first = sizes[0]
    for size in sizes:
        row = f"{size:>9} " + " ".join(f"{best[name, size]:>9.2f}" for name in trees)
        scale = (best["this", size] / size) / (best["this", first] / first)
        row += f" {scale:>18.2f}"
        if "other" in trees:
            row += f" {best['this', size] / best['other', size]:>11.2f}"
        print(row)
    last = sizes[-1]
    scale = (best["this", last] / last) / (best["this", first] / first)
    print(f"literals per-literal {last}/{first}: {scale:.2f}")


if __name__ == "__main__":
    main()
