"""Where the service's runs execute: `--executor local|process|ray` (docs/serve.md).

`Executor(name, processes, ray_address, run_threads)` is what the command line chose;
`check()` refuses what cannot work before anything starts: an option of
another executor (`--ray-address` without `--executor ray`, `--processes`
with `local`: CD433), Ray not installed (CD999). `workers(executor,
pipelines, database)` makes the batch package's `RunWorkers` for `process`
and `ray` (None for `local`: the runs execute on the service's own threads,
`_loops`); `start(workers, executor)` starts them, a worker that cannot start
raising `ServeFailed` (CD999) that names the option.

With workers the HTTP process only queues, stores and streams: each run is a
`converge_dsl.batch.OneRun` sent to the least busy worker, which opens the
service's database by path for the run's checkpoint journal and sends the
run's events back as they happen (`RunService` plays them on its `EventSink`), each
made on the worker into what that sink keeps (`_events.encode_event`).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.errors import ConvergeError

from ._errors import ServeFailed, ServeRefused

if TYPE_CHECKING:
    from converge_dsl.batch import OneRun, Pipeline, RunWorkers

    from ._store import RunRow

EXECUTORS = ("local", "process", "ray")


@dataclass(frozen=True)
class Executor:
    """`--executor NAME`, its `--processes N` (worker processes or Ray actors; None: one
    per CPU), `--ray-address ADDR` and `--run-threads N` (the threads of `local`; None:
    one, see `threads`)."""

    name: str = "local"
    processes: int | None = None
    ray_address: str | None = None
    run_threads: int | None = None

    def check(self) -> None:
        """Refuse a choice that cannot work (see the module docstring)."""
        if self.name not in EXECUTORS:
            raise ServeRefused(
                codes.EXECUTOR_UNUSABLE,
                f"--executor {self.name}: no such executor",
                hint=f"use one of {', '.join(EXECUTORS)}",
            )
        if self.ray_address is not None and self.name != "ray":
            raise ServeRefused(
                codes.EXECUTOR_OPTION_ALONE,
                f"--ray-address {self.ray_address} is given, but --executor is {self.name}",
                hint="add --executor ray to run on that Ray cluster, or leave --ray-address out",
            )
        if self.processes is not None and self.name == "local":
            raise ServeRefused(
                codes.EXECUTOR_OPTION_ALONE,
                f"--processes {self.processes} is given, but --executor is local",
                hint="add --executor process (or ray) to run the runs on that many workers, "
                "or leave --processes out",
            )
        if self.run_threads is not None and self.name != "local":
            raise ServeRefused(
                codes.EXECUTOR_OPTION_ALONE,
                f"--run-threads {self.run_threads} is given, but --executor is {self.name}",
                hint="leave --run-threads out: it is the number of threads of --executor local",
            )
        if self.name == "ray" and importlib.util.find_spec("ray") is None:
            raise ServeRefused(
                codes.EXECUTOR_UNUSABLE,
                "--executor ray needs Ray, which is not installed",
                hint="pip install 'converge-dsl[ray]', or serve with --executor process",
            )

    @property
    def threads(self) -> int:
        """The threads `local` runs its runs on (`_loops`): `run_threads`, else one. One
        by default: the runs share the interpreter's lock, so more threads run no more at
        once, and their hand-offs of that lock cost CPU (bench/serve.py: 6.1 against 6.5
        to 10.4 ms of server CPU per run with four)."""
        return self.run_threads or 1

    @property
    def count(self) -> int:
        """How many workers: `processes`, else one per CPU."""
        return self.processes or os.cpu_count() or 1


def workers(
    executor: Executor, pipelines: Mapping[str, Pipeline], database: Path
) -> RunWorkers | None:
    """The workers of `executor`, not started (None for `local`)."""
    if executor.name == "local":
        return None
    from converge_dsl.batch import run_workers

    return run_workers(
        executor.name,
        pipelines,
        database.resolve(),
        workers=executor.count,
        ray_address=executor.ray_address,
    )


def start(workers: RunWorkers, executor: Executor) -> None:
    """Start `workers`; `ServeFailed` (CD999) naming the option when they cannot."""
    from converge_dsl.batch import WorkerError

    try:
        workers.start()
    except WorkerError as exc:
        raise ServeFailed(
            codes.EXECUTOR_UNUSABLE, f"--executor {executor.name}: {exc.message}", hint=exc.hint
        ) from None


def one_run(
    row: RunRow, name: str, inputs: Mapping[str, Any], database: Path, budget: Mapping[str, float]
) -> OneRun:
    """The `OneRun` of a stored run: its journal in the state's `database`, its events
    made into what the service's `EventSink` keeps on the worker (`encode_event`)."""
    from converge_dsl.batch import OneRun

    from ._events import encode_event

    return OneRun(
        run=row.id,
        pipeline=name,
        inputs=dict(inputs),
        journal=database,
        budget=budget,
        encode=encode_event,
    )


def lost_too_often(strikes: int, why: str) -> ConvergeError:
    """The error of a run lost `strikes` times with its worker (CD434)."""
    return ConvergeError(
        f"serve: the run was lost {strikes} times: {why}",
        code=codes.EXECUTOR_WORKER_LOST,
        hint="a run that kills its worker (memory, a native crash) cannot finish there; "
        "look at the worker's resources, or serve with --executor local",
    )
