"""The one switch of global state: the collector skips what is older than a run or a check.

The only place that calls `gc.freeze` (docs/architecture.md §7): the engine's
run and validate's checks (`frontend.check_pipeline`) both go through
`quiet_collector()`. A run allocates a few objects per
fact and frees almost none until it ends, so each full collection of
CPython's cyclic collector walks every object alive, the compiled pipeline
and the caller's included. `quiet_collector()` moves the objects alive when
a run starts to the permanent generation (`gc.freeze`) and gives them back
(`gc.unfreeze`) when it ends: a collection during the run walks only what
the run made. Without it, 10^5 promoted facts cost about 13 µs each instead
of 8-10 (`bench/peers.py`'s facts shape). Nothing is collected less: garbage
made during the run is found as before. A run that starts while another is
under way (an enclosing one, or one in another thread: the language server
checks documents side by side) joins its freeze, which lasts until the last of
them ends: the first to end gave the objects back under the others. When objects
are frozen otherwise (`freeze_alive`, a caller that froze its own) or the
collector is off, it does nothing.

What is frozen is known without asking the collector when this module froze
it: `gc.get_freeze_count()` walks every frozen object (about 3.6 ms for
500,000), which a batch that froze its loaded pipeline paid once per case.
Only a freeze made by someone else is found by asking.
"""

from __future__ import annotations

import _thread
import gc
from collections.abc import Iterator
from contextlib import contextmanager

_lock = _thread.allocate_lock()  # `threading` is not imported for one lock: validate's start-up


class _Frozen:
    """What this module froze: for `runs` runs under way, the objects older than the
    first of them (until the last ends); `freeze_alive`, the objects alive then (for good)."""

    runs = 0
    for_good = False


def freeze_alive() -> None:
    """Move every object alive now to the permanent generation, for the rest of the process.

    For a process that keeps what it loaded and compiled until it exits (the
    command line's one run, a batch's loaded pipeline): no collection walks
    them again, and the runs after it leave the collector alone at no cost.
    """
    with _lock:
        gc.freeze()
        _Frozen.for_good = True


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Freeze the objects older than the run for the run's duration (see the module doc)."""
    with _lock:
        joins = _Frozen.runs > 0  # a run under way froze: this one shares its freeze
        # Else it freezes unless something else froze or the collector is off (the count of
        # frozen objects asked last: it walks them all).
        starts = (
            not joins and not _Frozen.for_good and gc.isenabled() and gc.get_freeze_count() == 0
        )
        if starts:
            gc.freeze()
        if joins or starts:
            _Frozen.runs += 1
    if not (joins or starts):
        yield
        return
    try:
        yield
    finally:
        with _lock:
            _Frozen.runs -= 1
            if not _Frozen.runs:
                gc.unfreeze()
