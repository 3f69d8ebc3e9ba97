"""When each file's checks run: after a pause in typing, one at a time per file, files side by side.

`Scheduler` keeps one pending check per file, an asyncio task. `replace(path, check)`
makes `check` the pending one: an earlier one still waiting for the pause
(`pause`, `debounce` seconds) is cancelled; one past it is superseded, as is one
dropped (`drop`): no longer the pending one (`is_pending` tells a check whether it
still is, and so whether what it found may be published), it stops where it can.
A check's work runs in worker threads through `in_turn`: those of one file one at
a time, those of different files side by side (`ANALYSES_AT_ONCE`). The work of a
superseded check that has not started by its turn does not run, and work under
way stops at its next `stop_point()` (called between its stages, in its thread):
both raise `Superseded`, which the check ends with. `settle` waits until no check
is pending or running.

It knows nothing of what a check does: the server makes the checks (`_server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

# How many files are analysed at once, each in a worker thread: a small pipeline's check
# (tens of milliseconds) then takes its share of the interpreter beside a large one's
# (seconds near the file-size cap) instead of waiting for its end.
ANALYSES_AT_ONCE = 4

_T = TypeVar("_T")


class Superseded(Exception):
    """The running check has been superseded: replaced by a newer one, or dropped. Raised
    by `Scheduler.in_turn` and its `stop_point`; never leaves the check it ends."""


class Scheduler:
    """The pending check of each file, the pause it waits for and the turns of its work."""

    def __init__(self, debounce: float, workers: int = ANALYSES_AT_ONCE) -> None:
        self.debounce = debounce
        self.pending: dict[Path, asyncio.Task[None]] = {}
        self._waiting: set[Path] = set()  # whose pending check still waits for the pause
        self._finishing: set[asyncio.Task[None]] = set()  # replaced checks past their wait
        self._worker = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="converge-dsl-check"
        )
        # One file's checks run one at a time: its lock, and how many checks hold or wait for it.
        self.turns: dict[Path, tuple[asyncio.Lock, int]] = {}
        # Each check's flag, set (on the loop) when it is superseded and read by its work
        # in a worker thread.
        self._superseded: dict[asyncio.Task[None], threading.Event] = {}

    def replace(self, path: Path, check: Coroutine[None, None, None]) -> None:
        """Make `check` the pending check of `path`. An earlier one still waiting for the
        pause is cancelled; one past it is superseded."""
        self.drop(path)
        self._waiting.add(path)
        task = asyncio.get_running_loop().create_task(check)
        self.pending[path] = task
        self._superseded[task] = threading.Event()
        task.add_done_callback(self._superseded.pop)

    def drop(self, path: Path) -> None:
        """`path` has no pending check: one still waiting for the pause is cancelled; one
        past it is superseded, and runs until it stops (`settle` waits for it)."""
        pending = self.pending.pop(path, None)
        if pending is not None and path in self._waiting:
            pending.cancel()
        elif pending is not None and not pending.done():
            self._superseded[pending].set()
            self._finishing.add(pending)
            pending.add_done_callback(self._finishing.discard)
        self._waiting.discard(path)

    def is_pending(self, path: Path) -> bool:
        """Whether the running check is still the pending check of `path` (not replaced by a
        newer one, nor dropped)."""
        return self.pending.get(path) is asyncio.current_task()

    def ended(self, path: Path) -> bool:
        """The running check of `path` has ended its work: whether it was still the pending
        one (then it no longer is)."""
        if not self.is_pending(path):
            return False
        del self.pending[path]
        return True

    async def pause(self, path: Path) -> None:
        """Wait for the pause in typing; after it, the check is no longer cancelled."""
        await asyncio.sleep(self.debounce)
        self._waiting.discard(path)

    def stop_point(self) -> Callable[[], None]:
        """For the running check's work: a call that raises `Superseded` once the check has
        been superseded, and else returns (thread-safe: the work calls it between stages)."""
        task = asyncio.current_task()
        flag = self._superseded.get(task) if task is not None else None

        def stop_point() -> None:
            if flag is not None and flag.is_set():
                raise Superseded

        return stop_point

    async def in_turn(
        self, path: Path, call: Callable[[], _T], *, superseded_too: bool = False
    ) -> _T:
        """`call()` in a worker thread once the checks of `path` before it have ended;
        `Superseded` instead when the running check has been superseded by its turn, unless
        `superseded_too` (work that must end: the editor model of what was published). The
        lock of `path` is kept while a check holds or waits for it, and dropped after the
        last (a lock's `locked()` is false between its release and the next waiter's turn)."""
        lock, users = self.turns.get(path, (asyncio.Lock(), 0))
        self.turns[path] = (lock, users + 1)
        stop_point = self.stop_point()
        try:
            async with lock:
                if not superseded_too:
                    stop_point()
                return await asyncio.get_running_loop().run_in_executor(self._worker, call)
        finally:
            lock, users = self.turns[path]
            if users == 1:
                del self.turns[path]
            else:
                self.turns[path] = (lock, users - 1)

    async def settle(self) -> None:
        """Wait until no check is pending or running."""
        while self.pending or self._finishing:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(
                    *self.pending.values(), *self._finishing, return_exceptions=True
                )
            self.pending = {p: t for p, t in self.pending.items() if not t.done()}

    def shutdown(self, wait: bool = False) -> None:
        """Stop the worker threads (`wait`: once the calls under way have ended)."""
        self._worker.shutdown(wait=wait)
