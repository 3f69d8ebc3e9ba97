"""The `local` executor: cases run concurrently as tasks of one event loop.

For I/O-bound pipelines (model calls): while one case waits for its model,
the others run. The pipeline is loaded once, then the case scheduler
(`_schedule.finished`) runs `concurrency` cases at a time and yields each
result as soon as it is done (the batch writes it at once).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

from converge_dsl.clock import SystemClock
from converge_dsl.engine import freeze_alive

from ._cases import Case, CaseResult
from ._schedule import drive, finished, local_pool, make_meter

if TYPE_CHECKING:
    from ._options import BatchOptions
    from ._pipeline import Pipeline


def run_locally(
    options: BatchOptions,
    workers: int,
    todo: list[Case],
    spent: tuple[int, int],
    loaded: Callable[[Pipeline], None],
) -> Generator[CaseResult, None, None]:
    """The `local` executor: load the pipeline now and hand it to `loaded`, then run
    `todo` as results are asked for."""
    from ._pipeline import load

    pipeline = load(
        options.pipeline,
        env=options.env,
        allow_roots=options.allow_roots,
        max_connections=max(64, workers),
        cache=options.cache,
    )
    try:
        loaded(pipeline)
    except BaseException:
        pipeline.close()
        raise
    freeze_alive()  # the loaded pipeline lives as long as the batch: no collection scans it
    clock = SystemClock()
    meter = make_meter(local_pool(options.limits, spent), clock)
    outputs = options.outputs
    sinks = (lambda case: outputs.sinks(case, clock)) if outputs.any else None
    return drive(pipeline, finished(pipeline, todo, concurrency=workers, meter=meter, sinks=sinks))
