"""Peak memory of a context of 100,000 facts, built through the engine; and of a whole process.

An always-candidate suggestor proposes 1,000 text facts a cycle for 100
cycles (events are not recorded, so what is measured is the context and the
proposals in flight). The peak is measured with tracemalloc.

Then, each in its own process (peak RSS from `getrusage` of the children):
`converge-dsl validate` and `converge-dsl run --format json` (stdout to
/dev/null) of the 10^5-seed pipeline of `bench/shapes.py`; the difference is
what the run and its JSON output add to loading the file. Since the loader
reads libyaml's events into a compact source map (docs/architecture.md §4),
these are about 140 MB and 110 MB (they were 485 MB and 457 MB with PyYAML's
node graph); the target is run <= 200 MB. Last line:

    facts-memory-mb: Z  run-json-peak-rss-mb: R  validate-peak-rss-mb: V

Run: .venv/bin/python bench/engine_memory.py [--no-process]
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

from converge_dsl.engine import Budget, ContextView, Engine, ProposedFact, Provenance
from converge_dsl.engine.testing import FnSuggestor

FACTS = 100_000
PER_CYCLE = 1_000
PROVENANCE = Provenance("bench@memory")


def propose(ctx: ContextView) -> list[ProposedFact]:
    if ctx.cycle > FACTS // PER_CYCLE:
        return []
    return [
        ProposedFact(
            "signals", f"fact-{ctx.cycle}-{i}", f"observation {ctx.cycle}/{i}", 0.9, PROVENANCE
        )
        for i in range(PER_CYCLE)
    ]


def peak_rss_mb(*command: str) -> float:
    """The peak RSS of one child process running `command` (stdout discarded)."""
    script = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=False, stdout=subprocess.DEVNULL)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    # A fresh parent per measurement: RUSAGE_CHILDREN keeps the maximum of all children.
    out = subprocess.run(
        [sys.executable, "-c", script, *command], check=True, capture_output=True, text=True
    )
    return int(out.stdout.split()[-1]) / 1024  # Linux reports KiB


def whole_process() -> tuple[float, float]:
    """(peak RSS MB of `run --format json`, of `validate`) at 10^5 seeded facts."""
    from shapes import facts_yaml

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "facts.yaml"
        path.write_text(facts_yaml(FACTS), encoding="utf-8")
        cli = (sys.executable, "-m", "converge_dsl")
        run = peak_rss_mb(*cli, "run", str(path), "--format", "json")
        validate = peak_rss_mb(*cli, "validate", str(path))
    return run, validate


def main() -> None:
    engine = Engine(budget=Budget(max_cycles=1_000, max_facts=FACTS + 1), record_events=False)
    engine.register(
        FnSuggestor("writer", [], propose, accepts=lambda ctx: ctx.cycle <= FACTS // PER_CYCLE)
    )
    tracemalloc.start()
    result = asyncio.run(engine.run())
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(result.context) == FACTS, (len(result.context), result.stop_reason)
    print(f"facts: {len(result.context):,}  stop: {result.stop_reason}  cycles: {result.cycles}")
    print(f"retained: {current / 2**20:.1f} MB ({current / FACTS:.0f} bytes/fact)")
    line = f"facts-memory-mb: {peak / 2**20:.1f}"
    if "--no-process" not in sys.argv:
        run, validate = whole_process()
        print(f"run --format json at {FACTS:,} seeded facts: peak RSS {run:.0f} MB")
        print(f"validate of the same file: peak RSS {validate:.0f} MB")
        line += f"  run-json-peak-rss-mb: {run:.0f}  validate-peak-rss-mb: {validate:.0f}"
    print(line)


if __name__ == "__main__":
    main()
