"""Store benchmark: what a served run's rows cost, its add written at once or in the group.

A `?wait=true` run's rows as the service writes them (`converge_dsl.serve.RunStore`):
added already running, then ended in the checkpoint journals' group commit
(`finish_later`) with 20 events and a result of about 1.5 KB; `--concurrency` runs
at once on one event loop, each ending after a few turns of it (so the ends do
not all share one group), `--runs` runs a round. Two ways to add it:

- `at once`: `RunStore.add`, a transaction of its own on the event loop's thread
  (what the service did before).
- `in the group`: `RunStore.add_later(urgent=False)`, a write of the group commit
  that holds the run's end at the latest (what the service does).

CPU of this process per run (every thread, user and system time apart: a commit
is mostly the kernel's writes to the log), the least of `--rounds` rounds, the two
ways alternating within each round, and their ratio.

Prints:

    load average L
    rows per run: at once U1 + S1 us (T1 us)  in the group U2 + S2 us (T2 us)  ratio R

Usage: python bench/store_rows.py [--runs N] [--concurrency N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
from pathlib import Path

BODY = {
    "stop_reason": "converged",
    "facts": {"x": [{"id": f"f{i}", "content": "y" * 120} for i in range(10)]},
}
EVENTS = [(i, json.dumps({"type": "e", "n": i, "text": "z" * 60})) for i in range(20)]
REQUEST = {"inputs": {"market": "Baltic 3PL"}, "budget": {}}


def rows(folder: Path, runs: int, concurrency: int, *, grouped: bool) -> tuple[float, float]:
    """User and system CPU seconds per run of `runs` runs' rows in a fresh store."""
    from converge_dsl.serve import RunStore

    store = RunStore(folder)

    async def main() -> tuple[float, float]:
        gate = asyncio.Semaphore(concurrency)

        async def one(n: int, round_: str) -> None:
            async with gate:
                run = f"{round_}{n:031x}"
                if grouped:
                    store.add_later(run, "p", REQUEST, 1.0, running=True, urgent=False)
                else:
                    store.add(run, "p", REQUEST, 1.0, running=True)
                for _ in range(n % 7):
                    await asyncio.sleep(0.0005)
                ending = store.finish_later(
                    run, status="done", stop_reason="converged", body=BODY, events=EVENTS, now=2.0
                )
                assert await asyncio.wrap_future(ending)

        await asyncio.gather(*(one(n, "a") for n in range(min(runs, 2 * concurrency))))
        before = resource.getrusage(resource.RUSAGE_SELF)
        await asyncio.gather(*(one(n, "b") for n in range(runs)))
        after = resource.getrusage(resource.RUSAGE_SELF)
        return (
            (after.ru_utime - before.ru_utime) / runs,
            (after.ru_stime - before.ru_stime) / runs,
        )

    try:
        return asyncio.run(main())
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()}", flush=True)
    best: dict[bool, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-store-rows-") as tmp:
        for round_ in range(args.rounds):
            for grouped in (False, True):
                folder = Path(tmp) / f"{round_}-{grouped}"
                user, system = rows(folder, args.runs, args.concurrency, grouped=grouped)
                if grouped not in best or user + system < sum(best[grouped]):
                    best[grouped] = (user, system)
    (u1, s1), (u2, s2) = best[False], best[True]
    print(
        f"rows per run: at once {1e6 * u1:.0f} + {1e6 * s1:.0f} us ({1e6 * (u1 + s1):.0f} us)  "
        f"in the group {1e6 * u2:.0f} + {1e6 * s2:.0f} us ({1e6 * (u2 + s2):.0f} us)  "
        f"ratio {(u2 + s2) / (u1 + s1):.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
