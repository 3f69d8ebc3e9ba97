"""Peak memory of a context of 100,000 facts, built through the engine.

An always-candidate suggestor proposes 1,000 text facts a cycle for 100
cycles (events are not recorded, so what is measured is the context and the
proposals in flight). The peak is measured with tracemalloc. Last line:

    facts-memory-mb: Z

Run: .venv/bin/python bench/engine_memory.py
"""

from __future__ import annotations

import asyncio
import tracemalloc

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
    print(f"facts-memory-mb: {peak / 2**20:.1f}")


if __name__ == "__main__":
    main()
