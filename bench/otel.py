"""Benchmark: what OpenTelemetry export costs a run.

Runs each example pipeline (scripted models) `--repeat` times in process,
without export and with export to a real OTLP/HTTP receiver on 127.0.0.1
(the test's receiver: `opentelemetry-proto` decodes each request), and prints
the best time of each and the spans sent. The run's end includes the bounded
flush of the spans still queued.

Last line: `otel overhead per run: X ms  spans per run: Y` (agent-review).

Run: .venv/bin/python bench/otel.py [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from test_otel_cli import _Receiver  # noqa: E402

from converge_dsl.runtime import RunOptions, run_pipeline  # noqa: E402


def _best(pipeline: Path, env: dict[str, str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        asyncio.run(run_pipeline(RunOptions(pipeline=pipeline, env=env, compile_cache=False)))
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    receiver = _Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    last = (0.0, 0)
    try:
        for name in ("support-triage", "incident-triage", "agent-review"):
            pipeline = ROOT / "pipelines" / f"{name}.yaml"
            plain = _best(pipeline, {}, args.repeat)
            before = len(receiver.spans)
            exported = _best(pipeline, env, args.repeat)
            spans = (len(receiver.spans) - before) // args.repeat
            last = ((exported - plain) * 1000, spans)
            print(
                f"{name}: {plain * 1000:.1f} ms without export, {exported * 1000:.1f} ms with "
                f"({spans} spans a run)"
            )
    finally:
        receiver.shutdown()
    print(f"otel overhead per run: {last[0]:.1f} ms  spans per run: {last[1]}")


if __name__ == "__main__":
    main()
