"""Benchmark: whole-process `converge-dsl run` of a 10,000-suggestor fan-out, cold and cached.

Each figure is one whole process (`python -m converge_dsl run --format json
FILE`, output to /dev/null), the minimum of `--repeats` runs:

- cold: an empty compile cache before every run (the cache is written);
- cached: the same pipeline again, its compile cache written by the run before;
- off: `--no-cache` (what a run costs without the cache, for reference).

Two pipelines of 10,000 rules after one source fact (the `bench/shapes.py`
fan-out shapes):

- `fan10k`: every rule emits a literal id and content (`f12`, `x`): no Jinja at
  all once literals are recognised;
- `templated10k`: every rule emits an id and a content that are real templates,
  each one different (`f{{ cycle }}-12`, `{{ count("src") + 12 }}`): 20,000
  distinct sources to compile, the case the compile cache is for.

The cache and the key folder are temporary (`CONVERGE_DSL_CACHE`,
`CONVERGE_DSL_CONFIG_DIR`). Last line:

    fan10k-run: A s  fan10k-cached: B s  templated10k-run: C s  templated10k-cached: D s

(targets: A <= 3, B <= 1.5). Usage: python bench/compile.py [--repeats N] [--size N]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from shapes import fan_yaml, templated_yaml  # noqa: E402


def _run(pipeline: Path, env: dict[str, str], *flags: str) -> float:
    command = [sys.executable, "-m", "converge_dsl", "run", "--format", "json", *flags]
    started = time.perf_counter()
    subprocess.run([*command, str(pipeline)], check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(pipeline: Path, env: dict[str, str], repeats: int) -> dict[str, float]:
    """Best cold, cached and cache-off seconds for one pipeline, runs interleaved."""
    cache = Path(env["CONVERGE_DSL_CACHE"])
    best = {"cold": math.inf, "cached": math.inf, "off": math.inf}
    for _ in range(repeats):
        shutil.rmtree(cache, ignore_errors=True)
        best["cold"] = min(best["cold"], _run(pipeline, env))
        best["cached"] = min(best["cached"], _run(pipeline, env))
        best["off"] = min(best["off"], _run(pipeline, env, "--no-cache"))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", type=int, default=10_000)
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        env = dict(os.environ)
        env.pop("CONVERGE_DSL_NO_CACHE", None)
        env["CONVERGE_DSL_CACHE"] = str(base / "cache")
        env["CONVERGE_DSL_CONFIG_DIR"] = str(base / "config")
        for name, text in (
            (f"fan{args.size // 1000}k", fan_yaml(args.size)),
            (f"templated{args.size // 1000}k", templated_yaml(args.size)),
        ):
            pipeline = base / f"{name}.yaml"
            pipeline.write_text(text, encoding="utf-8")
            _run(pipeline, env)  # warm the file system and Python's bytecode
            best = figures[name] = measure(pipeline, env, args.repeats)
            print(
                f"{name} run: cold {best['cold']:.3f} s  cached {best['cached']:.3f} s  "
                f"no-cache {best['off']:.3f} s",
                flush=True,
            )
    fan, templated = figures.values()
    names = list(figures)
    print(
        f"{names[0]}-run: {fan['cold']:.3f} s  {names[0]}-cached: {fan['cached']:.3f} s  "
        f"{names[1]}-run: {templated['cold']:.3f} s  "
        f"{names[1]}-cached: {templated['cached']:.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
