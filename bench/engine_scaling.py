"""Engine scaling: per-cycle cost must not grow with the number of compiled rules.

A generated pipeline of N = 1,000 / 10,000 / 100,000 compiled rules, built
through the public path (YAML file -> load + validate -> compile -> engine):
a ring of 4 keys with 4 active rules each (every cycle they read the key the
previous cycle wrote and write the next one, one new fact each), and
N - 16 filler rules over 1,000 filler keys that are never written, so the same
small number of rules runs every cycle whatever N is, while the pipeline
declares 1,004 keys. A render scope rebuilt over every declared key per
cycle, or any other per-cycle work over all rules or keys, shows here.
Compilation is outside the timed region (and slow at 100,000 rules: every
template is compiled once per rule). The file of 100,000 rules is over the
loader's default size cap (CD011): the bench raises the cap through its
documented setting, `CONVERGE_DSL_MAX_FILE_BYTES`, to the file's size.

Then one cycle of 100 suggestors that each await a 50 ms sleep (the engine's
own concurrency, without a model client: `bench/peers.py` measures model
calls over HTTP). Last line:

    per-cycle ratio 100k/1k: X  concurrency ratio: Y

X = per-cycle time at 100k / at 1k (target <= 2.0); Y = wall time of the
fan-out cycle / 50 ms (target <= 1.5).

Run: python bench/engine_scaling.py [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from converge_dsl.clock import SystemClock
from converge_dsl.engine import Budget, ContextView, Engine, ProposedFact, Provenance
from converge_dsl.engine.testing import FnSuggestor

FILLER_KEYS = 1000
RING = 4  # chain keys in the ring
ACTIVE_PER_KEY = 4  # rules that run each cycle
CYCLES = 300
REPEATS = 5


def pipeline_text(total: int) -> str:
    """The ring plus `total - RING * ACTIVE_PER_KEY` filler rules."""
    keys = [f"f{i:03d}" for i in range(FILLER_KEYS)] + [f"ring{j}" for j in range(RING)]
    lines = [
        "apiVersion: converge-dsl/v1",
        "kind: Pipeline",
        f"name: scaling-{total}",
        "keys: [" + ", ".join(f"{{name: {k}}}" for k in keys) + "]",
        f"budget: {{max_cycles: {CYCLES}, max_facts: 10000000}}",
        "seeds: [{id: start, key: ring0, content: go}]",
        "suggestors:",
    ]
    for j in range(RING):
        for a in range(ACTIVE_PER_KEY):
            lines.append(
                f"  - {{name: active-{j}-{a}, kind: rule, dependencies: [ring{j}], when: 'true', "
                f"emit: [{{key: ring{(j + 1) % RING}, id: 'a{j}-{a}-{{{{ cycle }}}}', "
                "content: step}]}"
            )
    for i in range(total - RING * ACTIVE_PER_KEY):
        lines.append(
            f"  - {{name: filler-{i}, kind: rule, dependencies: [f{i % FILLER_KEYS:03d}], "
            f"emit: [{{key: f{i % FILLER_KEYS:03d}, id: x{i}, content: never}}]}}"
        )
    return "\n".join(lines) + "\n"


def compile_text(text: str, folder: Path) -> Any:
    """load + validate + compile, as `converge-dsl run` does (no models)."""
    from converge_dsl.compiler import compile_pipeline, compile_settings
    from converge_dsl.engine import UsageMeter
    from converge_dsl.frontend._loader import MAX_BYTES, MAX_BYTES_VARIABLE
    from converge_dsl.runtime import SUGGESTOR_KINDS, TraceWriter, load_document

    path = folder / "scaling.yaml"
    path.write_text(text, encoding="utf-8")
    os.environ[MAX_BYTES_VARIABLE] = str(max(MAX_BYTES, path.stat().st_size))
    settings = compile_settings(load_document(path), inputs={})
    meter = UsageMeter(settings.budget, clock=SystemClock())
    return compile_pipeline(
        settings, models={}, usage=meter, events=TraceWriter({}), kinds=SUGGESTOR_KINDS
    )


def per_cycle_seconds(total: int, folder: Path) -> float:
    from converge_dsl.runtime import TraceWriter, build_engine

    started = time.perf_counter()
    compiled = compile_text(pipeline_text(total), folder)
    print(f"  compiled {total:,} rules in {time.perf_counter() - started:.1f} s", flush=True)
    samples = []
    for _ in range(REPEATS):
        engine = build_engine(compiled, TraceWriter({}), SystemClock())
        gc.collect()
        started = time.perf_counter()
        result = asyncio.run(engine.run(compiled.seeds))
        elapsed = time.perf_counter() - started
        assert result.cycles == CYCLES, result.stop_reason
        samples.append(elapsed / CYCLES)
    return statistics.median(samples)


def _sleeper(name: str) -> Any:
    provenance = Provenance(name)

    def propose(ctx: ContextView) -> list[ProposedFact]:
        return [ProposedFact("signals", f"{name}-{ctx.cycle}", "step", 1.0, provenance)]

    return propose


def fan_out_seconds(width: int = 100, sleep_s: float = 0.05) -> float:
    clock = SystemClock()
    engine = Engine(budget=Budget(max_concurrency=width), clock=clock)
    for i in range(width):
        name = f"sleeper-{i}"
        engine.register(
            FnSuggestor(
                name,
                [],
                _sleeper(name),
                accepts=lambda ctx: ctx.cycle == 1,
                delay=sleep_s,
                clock=clock,
            )
        )
    started = time.perf_counter()
    result = asyncio.run(engine.run())
    elapsed = time.perf_counter() - started
    assert result.context.count("signals") == width
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description="Per-cycle cost vs number of compiled rules.")
    parser.add_argument("--sizes", default="1000,10000,100000", help="rule counts, comma-separated")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    figures = {}
    with tempfile.TemporaryDirectory() as folder:
        for total in sizes:
            figures[total] = per_cycle_seconds(total, Path(folder))
            print(f"N={total:>7,}: per-cycle {figures[total] * 1e6:8.1f} us", flush=True)
    fan_out = min(fan_out_seconds() for _ in range(3))
    print(f"fan-out of 100 x 50 ms sleeps: {fan_out * 1e3:.1f} ms")
    ratio = figures[sizes[-1]] / figures[sizes[0]]
    print(
        f"per-cycle ratio {sizes[-1] // 1000}k/{sizes[0] // 1000}k: {ratio:.2f}  "
        f"concurrency ratio: {fan_out / 0.05:.2f}"
    )


if __name__ == "__main__":
    main()
