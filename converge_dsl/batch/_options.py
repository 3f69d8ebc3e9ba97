"""`BatchOptions`: everything `converge-dsl run PIPELINE --cases ... --out ...` can say.

The lowest layer of a batch run with `_schedule`: the executors (`_local`,
`_process`, `_ray`) and `run_batch` (`_run`) read these options; nothing here
knows how a pipeline is loaded or run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.errors import UsageError

from ._budget import BatchLimits
from ._outputs import CaseOutputs

if TYPE_CHECKING:
    from converge_dsl.runtime import CacheSettings

EXECUTORS = ("local", "process", "ray")
DEFAULT_LOCAL_CONCURRENCY = 16
# The most worker processes (or Ray actors) a batch starts, whatever --concurrency says.
MAX_WORKERS = 1024


@dataclass(frozen=True)
class BatchOptions:
    """Everything `converge-dsl run PIPELINE --cases ... --out ...` can say."""

    pipeline: Path
    cases: Path
    out: Path
    executor: str = "local"
    concurrency: int | None = None
    resume: bool = False
    limits: BatchLimits = field(default_factory=BatchLimits)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    allow_roots: tuple[Path, ...] = ()
    ray_address: str | None = None
    # `--report R.html`: the batch page (each case's own report: `outputs.report`).
    report: Path | None = None
    # What each case's run writes (`--trace DIR`, `--report`, `--otel`; `_outputs`).
    outputs: CaseOutputs = field(default_factory=CaseOutputs)
    # The answer cache of every case, in every executor (None: as `env` says; docs/cache.md).
    cache: CacheSettings | None = None
    # `--replay DIR`: each case's models answered from its own cassette there (`_cassettes`).
    replay: Path | None = None

    def workers(self) -> int:
        """The concurrency: given, else 16 cases (`local`) or one per CPU.

        For `process` and `ray` it is a number of worker processes or actors: more
        than `MAX_WORKERS` is a `UsageError` (each is a Python process).
        """
        if self.concurrency is not None:
            if self.concurrency < 1:
                raise UsageError("--concurrency must be at least 1", code=codes.ARGUMENTS_REFUSED)
            if self.executor != "local" and self.concurrency > MAX_WORKERS:
                raise UsageError(
                    f"--concurrency {self.concurrency} would start as many worker processes "
                    f"with --executor {self.executor}; at most {MAX_WORKERS} are started",
                    hint="give at most a few per CPU; --executor local runs any number of "
                    "cases at once on one event loop",
                    code=codes.ARGUMENTS_REFUSED,
                )
            return self.concurrency
        if self.executor == "local":
            return DEFAULT_LOCAL_CONCURRENCY
        return max(1, os.cpu_count() or 1)
