"""What a service allows each pipeline (`Limits`: runs at once, runs waiting, a run's
longest wall time) and which finished runs it keeps (`Retention`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Per pipeline: runs at once, runs waiting; the longest wall time of a run (seconds)."""

    concurrency: int = 4
    queue: int = 64
    max_run_s: float | None = None


@dataclass(frozen=True)
class Retention:
    """Which finished runs are deleted: past the newest `keep_runs`, or older than
    `days`; looked at every `every_s` seconds (nothing is deleted when both are None)."""

    keep_runs: int | None = None
    days: float | None = None
    every_s: float = 60.0

    @property
    def active(self) -> bool:
        return self.keep_runs is not None or self.days is not None
