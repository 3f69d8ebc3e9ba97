"""CPU per model call: N concurrent llm calls through the public path, against the
loopback server of `bench/loopback.py` (its own process, 100 ms per answer).

Each run builds fresh models (as `run` does), so a run's first request pays
for its client; prints wall time / latency and the client process's CPU
milliseconds per call, for each of `--runs` runs; `--profile` adds a cProfile
of the last run, by own time and summed per package.

Usage: python bench/call_cpu.py [N] [--runs R] [--profile]   (default N 200)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import gc
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # the same pipeline and public path as the peer benchmark
import shapes


def _per_package(stats: pstats.Stats) -> None:
    totals: collections.Counter[str] = collections.Counter()
    for (path, _line, name), row in stats.stats.items():  # type: ignore[attr-defined]
        if "site-packages/" in path:
            key = path.split("site-packages/")[1].split("/")[0]
        elif "converge_dsl/" in path:
            key = "converge_dsl/" + path.split("converge_dsl/")[1]
        elif "python3" in path and "/lib/" in path:
            key = "stdlib/" + path.rsplit("/lib/", 1)[1].split("/", 1)[1]
        else:
            key = name if path == "~" else path
        totals[key] += row[2]
    for key, seconds in totals.most_common(25):
        print(f"{seconds * 1000:8.1f} ms  {key}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("calls", type=int, nargs="?", default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    server, base_url = peers.start_loopback()
    runner = asyncio.Runner()
    profile = cProfile.Profile()
    cpu: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            text = shapes.calls_yaml(args.calls, base_url)
            ours = peers.Ours(Path(tmp), "calls", text, expect_facts=args.calls + 1)
            for run in range(args.runs):
                ours.prepare()
                gc.collect()
                last = args.profile and run == args.runs - 1
                started, cpu_started = time.perf_counter(), time.process_time()
                if last:
                    profile.enable()
                runner.run(ours.run())
                if last:
                    profile.disable()
                wall = time.perf_counter() - started
                cpu.append((time.process_time() - cpu_started) * 1000 / args.calls)
                print(
                    f"run {run}: {wall / peers.LATENCY_S:.2f} x latency, "
                    f"{cpu[-1]:.2f} ms CPU per call"
                )
    finally:
        runner.close()
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    if args.profile:
        stats = pstats.Stats(profile)
        stats.sort_stats("tottime").print_stats(25)
        _per_package(stats)
    print(f"{args.calls} calls: best {min(cpu):.2f} ms CPU per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
