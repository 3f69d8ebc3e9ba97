"""Engine scaling: per-cycle cost must not grow with the number of registered suggestors.

Registers N = 1,000 / 10,000 / 100,000 suggestors spread over 1,000 keys. Only a
small ring of "active" suggestors (4 per cycle) ever becomes eligible: each cycle
they read the key dirtied by the previous cycle and write the next one, so the
same small number is eligible every cycle whatever N is. Prints the per-cycle
time for each N, then runs one cycle of 100 suggestors that each await a 50 ms
sleep (fan-out concurrency). Last line:

    per-cycle ratio 100k/1k: X  concurrency ratio: Y

X = per-cycle time at 100k / at 1k (target <= 2.0); Y = wall time of the
fan-out cycle / 50 ms (target <= 1.5).

Run: .venv/bin/python bench/engine_scaling.py
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time

from converge_dsl.clock import SystemClock
from converge_dsl.engine import Budget, ContextView, Engine, ProposedFact, Provenance
from converge_dsl.engine.testing import FnSuggestor

FILLER_KEYS = [f"k{i:03d}" for i in range(1000)]
RING = 4  # chain keys in the ring
ACTIVE_PER_KEY = 4  # suggestors eligible each cycle
CYCLES = 300
REPEATS = 5


def _never(ctx: ContextView) -> bool:
    return False


def _no_proposals(ctx: ContextView) -> list[ProposedFact]:
    return []


def _ring_step(name: str, target: str):  # type: ignore[no-untyped-def]
    provenance = Provenance(name)

    def propose(ctx: ContextView) -> list[ProposedFact]:
        return [ProposedFact(target, f"{name}-{ctx.cycle}", "step", 1.0, provenance)]

    return propose


def _always(ctx: ContextView) -> bool:
    return True


def build(total: int) -> Engine:
    chain = [f"chain{j}" for j in range(RING)]
    engine = Engine(
        budget=Budget(max_cycles=CYCLES, max_facts=10**7),
        declared_keys=[*FILLER_KEYS, *chain],
    )
    for j, key in enumerate(chain):
        for a in range(ACTIVE_PER_KEY):
            name = f"active-{j}-{a}"
            engine.register(
                FnSuggestor(name, [key], _ring_step(name, chain[(j + 1) % RING]), accepts=_always)
            )
    for i in range(total - RING * ACTIVE_PER_KEY):
        engine.register(
            FnSuggestor(f"filler-{i}", [FILLER_KEYS[i % 1000]], _no_proposals, accepts=_never)
        )
    return engine


def per_cycle_seconds(total: int) -> float:
    samples = []
    for _ in range(REPEATS):
        engine = build(total)
        gc.collect()
        seed = ProposedFact("chain0", "start", "go", 1.0, Provenance("bench"))
        started = time.perf_counter()
        result = asyncio.run(engine.run([seed]))
        elapsed = time.perf_counter() - started
        assert result.cycles == CYCLES, result.stop_reason
        samples.append(elapsed / CYCLES)
    return statistics.median(samples)


def fan_out_seconds(width: int = 100, sleep_s: float = 0.05) -> float:
    clock = SystemClock()
    engine = Engine(budget=Budget(max_concurrency=width), clock=clock)
    for i in range(width):
        name = f"sleeper-{i}"
        engine.register(
            FnSuggestor(
                name,
                [],
                _ring_step(name, "signals"),
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
    figures = {}
    for total in (1_000, 10_000, 100_000):
        figures[total] = per_cycle_seconds(total)
        print(f"N={total:>7,}: per-cycle {figures[total] * 1e6:8.1f} us")
    fan_out = min(fan_out_seconds() for _ in range(3))
    print(f"fan-out of 100 x 50 ms sleeps: {fan_out * 1e3:.1f} ms")
    ratio = figures[100_000] / figures[1_000]
    print(f"per-cycle ratio 100k/1k: {ratio:.2f}  concurrency ratio: {fan_out / 0.05:.2f}")


if __name__ == "__main__":
    main()
