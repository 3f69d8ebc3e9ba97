"""Worker benchmark: what a run costs on a worker process, against the same run in process.

`pipelines/market-entry.yaml` on its scripted model, each run asked as the
service asks (`OneRun` with the service's `encode_event`, a checkpoint journal
in a SQLite database), `--concurrency` runs in flight at once; CPU time per
run, min over `--rounds` rounds, the two ways alternating within each round:

- `in process`: `execute_one` on this process's event loop, its messages
  played back at once on a sink that keeps nothing (`Relayed`): the run, its
  checkpoint journal and its events made into what the service's sink keeps,
  without a pipe.
- `worker`: the same runs through `ProcessWorkers` with one worker process:
  the worker's CPU (from /proc) and this process's (its reader thread playing
  the messages back, and the submits) per run, apart and together.

Their ratio is what the pipe, the pickling and the hand-offs between threads
add to a run (no HTTP, no queue, no store of the service's).

Prints:

    load average L
    per run: in process P ms; worker W ms + caller C ms = T ms; ratio R

Usage: python bench/one_workers.py [--runs N] [--concurrency N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "market-entry.yaml"
INPUTS = {"market": "Baltic 3PL"}


def _job(run: str, database: Path) -> Any:
    from converge_dsl.batch import OneRun
    from converge_dsl.serve._events import encode_event

    return OneRun(run, "market-entry", INPUTS, database, encode=encode_event)


class _Dropped:
    """A sink that hears every hook and keeps nothing."""

    listens = True

    def open(self, clock: object) -> None:
        pass

    def on_compiled(self, compiled: object, sources: object) -> None:
        pass

    def on_event(self, event: object) -> None:
        pass

    def on_result(self, outcome: object) -> None:
        pass

    def close(self) -> None:
        pass


def in_process(runs: int, concurrency: int, folder: Path) -> float:
    """CPU seconds per run of `execute_one` in this process (see the module)."""
    from converge_dsl.batch import execute_one, load, open_journals
    from converge_dsl.batch._one import Relayed

    pipeline = load(PIPELINE)
    database = folder / "in-process.sqlite3"
    journals = open_journals(database)
    count = iter(range(10**9))

    async def main() -> float:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                relayed = Relayed([_Dropped()])  # type: ignore[list-item]
                job = _job(f"p{next(count)}", database)
                await execute_one(pipeline, job, relayed.deliver, journals)

        await asyncio.gather(*(one() for _ in range(min(runs, 2 * concurrency))))
        cpu = time.process_time()
        await asyncio.gather(*(one() for _ in range(runs)))
        cpu = time.process_time() - cpu
        await pipeline.aclose()
        return cpu / runs

    try:
        return asyncio.run(main())
    finally:
        journals[0].close()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def on_worker(runs: int, concurrency: int, folder: Path) -> tuple[float, float]:
    """CPU seconds per run of the worker process and of this process (see the module)."""
    from converge_dsl.batch import ProcessWorkers, load

    database = folder / "worker.sqlite3"
    workers = ProcessWorkers({"market-entry": load(PIPELINE)}, database, 1)
    workers.start()
    (pid,) = workers.pids()
    count = iter(range(10**9))
    try:

        def batch(n: int) -> None:
            gate = threading.Semaphore(concurrency)
            tickets = []
            for _ in range(n):
                gate.acquire()
                ticket = workers.submit(_job(f"w{next(count)}", database), [_Dropped()])  # type: ignore[list-item]
                ticket.future.add_done_callback(lambda _: gate.release())
                tickets.append(ticket)
            for ticket in tickets:
                end = ticket.future.result(timeout=120)
                assert end.status == "done", end

        batch(min(runs, 2 * concurrency))
        worker, here = _cpu_s(pid), time.process_time()
        batch(runs)
        return (_cpu_s(pid) - worker) / runs, (time.process_time() - here) / runs
    finally:
        workers.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-one-workers-") as tmp:
        folder = Path(tmp)
        os.environ["CONVERGE_DSL_CONFIG_DIR"] = str(folder / "config")
        print(f"load average {os.getloadavg()}", flush=True)
        best_here, best_worker, best_caller = float("inf"), float("inf"), float("inf")
        for _ in range(args.rounds):
            best_here = min(best_here, in_process(args.runs, args.concurrency, folder))
            worker, caller = on_worker(args.runs, args.concurrency, folder)
            if worker + caller < best_worker + best_caller:
                best_worker, best_caller = worker, caller
        total = best_worker + best_caller
        print(
            f"per run: in process {1000 * best_here:.3f} ms; worker {1000 * best_worker:.3f} "
            f"ms + caller {1000 * best_caller:.3f} ms = {1000 * total:.3f} ms; "
            f"ratio {total / best_here:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
