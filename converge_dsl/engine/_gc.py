"""Garbage-collector pressure during a run (docs/architecture.md §7).

Engine-internal. A run allocates a few objects per fact and frees almost
none of them until it ends, so CPython's cyclic collector, whose full
collections walk every tracked object, turns a run's cost superlinear in its
facts (two full collections over 10^5 facts were about half of a run's
time). `quiet_collector()` moves every object that exists when a run starts
(the compiled pipeline, the seeds, whatever the caller holds) to the
collector's permanent generation (`gc.freeze`) for the run, so a collection
during the run walks only what the run itself made, and gives them back
(`gc.unfreeze`) when the outermost run ends. It does nothing when the
collector is disabled or the caller froze objects itself (those stay frozen).
Nothing is collected less: garbage made during the run is found as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


class _Runs:
    """How many runs are inside `quiet_collector`, and whether the outermost froze."""

    depth = 0
    froze = False


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Freeze the objects older than the run for the run's duration (nested: the outermost)."""
    if _Runs.depth == 0:
        _Runs.froze = gc.isenabled() and gc.get_freeze_count() == 0
        if _Runs.froze:
            gc.freeze()
    _Runs.depth += 1
    try:
        yield
    finally:
        _Runs.depth -= 1
        if _Runs.depth == 0 and _Runs.froze:
            _Runs.froze = False
            gc.unfreeze()
