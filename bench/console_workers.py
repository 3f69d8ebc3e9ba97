"""What a worker process costs before its first task when the command line was started
by its console script (`converge-dsl`, the script an installer writes).

multiprocessing runs a main module known only by its path again, as `__mp_main__`, in
each worker it starts, forked by the fork server or spawned; `converge_dsl.cli.main`
names the console script `converge_dsl.__main__` (`_main_is_the_package`), so it is not.
For each start method the system has, a fresh process running a copy of the console
script starts `--workers` one-worker pools in turn (the fork server started, and its
imports done, first) and each worker reports the CPU time it spent before its first
task; the best worker of each, with the script known by its path ("as is") and named
("named"), and their difference per worker.

Prints one line per start method, with the one-minute load average:

    forkserver: as is A ms, named B ms, saved A-B ms per worker  (load L)

Usage: python bench/console_workers.py [--workers N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The console script an installer writes, then the probe (no name bound before the
# check, as in the real script).
SCRIPT = f"""\
import re
import sys
from converge_dsl.cli import main
if __name__ == "__main__":
    if sys.argv[1] == "named":
        sys.modules["converge_dsl.cli"]._main_is_the_package()
    sys.path.insert(0, {str(HERE)!r})
    __import__("console_workers").probe(sys.argv[2], int(sys.argv[3]))
"""


def probe(method: str, workers: int) -> None:
    """Print the CPU seconds (JSON list) each of `workers` fresh one-worker pools'
    worker spent before its first task, started with `method`."""
    from concurrent.futures import ProcessPoolExecutor

    from converge_dsl.batch import _process

    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context = _process._context()
        _process.start_fork_server()
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            pool.submit(time.process_time).result()  # the server's imports are done
    spent = []
    for _ in range(workers):
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            spent.append(pool.submit(time.process_time).result())
    print(json.dumps(spent))


def _best(script: Path, mode: str, method: str, workers: int) -> float:
    done = subprocess.run(
        [sys.executable, str(script), mode, method, str(workers)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return min(json.loads(done.stdout.splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10)
    args = parser.parse_args()
    methods = [m for m in ("forkserver", "spawn") if m in multiprocessing.get_all_start_methods()]
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "converge-dsl"
        script.write_text(SCRIPT)
        for method in methods:
            as_is = _best(script, "as-is", method, args.workers)
            named = _best(script, "named", method, args.workers)
            print(
                f"{method}: as is {as_is * 1e3:.1f} ms, named {named * 1e3:.1f} ms, "
                f"saved {(as_is - named) * 1e3:.1f} ms per worker  "
                f"(load {os.getloadavg()[0]:.2f})"
            )


if __name__ == "__main__":
    main()
