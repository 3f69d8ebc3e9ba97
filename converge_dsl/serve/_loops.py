"""Event loops on threads of their own, where the service's runs execute.

A run writes its checkpoint journal as it goes and waits for the disk when it
closes it (`converge_dsl.runtime`'s journal syncs): on the service's own loop
that wait would stall every request and every other run. `RunLoops(n)` starts
`n` threads, each running an event loop; `submit(coroutine)` runs a coroutine
on the next one (round robin) and returns its `Remote`: `await remote.result()`
on the service's loop gives what the coroutine returned or raised, once its
task has really ended there; `remote.cancel()` cancels that task. The hand-offs
each way go through an `Inbox` of the loop they go to: the calls handed to a loop
while it has not yet run the first of them wake it once, not once each (a wake-up
is a write to its self-pipe, then a read and a turn of that loop);
`Inbox.future` is `asyncio.wrap_future` through one (the group commit tells
the ends of its runs one after the other: one wake-up). `close()` lets
`on_close(loop)` release what each loop holds (connection pools), then stops
and joins the threads. The runs share the interpreter: what a thread buys is
that the HTTP layer's loop answers while runs compute (a run waiting for a
model, or for the disk, awaits, so it blocks no other run of its loop).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

T = TypeVar("T")
# How long `close` waits for a loop's clean-up and its thread (seconds).
CLOSE_S = 10.0


class Inbox:
    """Calls handed to `loop` from other threads, run there in the order handed; the loop
    is woken once for the calls handed while it has not yet run the first of them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._calls: collections.deque[tuple[Callable[..., object], tuple[Any, ...]]] = (
            collections.deque()
        )
        self._lock = threading.Lock()
        self._woken = False

    def put(self, call: Callable[..., object], *args: Any) -> None:
        """Run `call(*args)` on the loop, after the calls handed before it."""
        with self._lock:
            self._calls.append((call, args))
            if self._woken:
                return
            self._woken = True
        self.loop.call_soon_threadsafe(self._run)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Inbox:
        """The inbox of `loop` (one per loop; call on the loop's own thread)."""
        inbox = _INBOXES.get(loop)
        if inbox is None:
            inbox = _INBOXES[loop] = cls(loop)
        return inbox

    def future(self, future: Future[T]) -> asyncio.Future[T]:
        """`asyncio.wrap_future(future)` for this inbox's loop, its outcome handed over
        through the inbox (call on that loop's thread)."""
        mirror: asyncio.Future[T] = self.loop.create_future()

        def copy(done: Future[T]) -> None:
            if mirror.done():  # cancelled meanwhile
                return
            if done.cancelled():
                mirror.cancel()
                return
            error = done.exception()
            if error is None:
                mirror.set_result(done.result())
            else:
                mirror.set_exception(error)

        future.add_done_callback(lambda done: self.put(copy, done))
        return mirror

    def _run(self) -> None:
        with self._lock:
            self._woken = False
            calls, self._calls = self._calls, collections.deque()
        for call, args in calls:
            try:
                call(*args)
            except Exception as exc:  # as the loop reports a failing callback: the rest run
                self.loop.call_exception_handler(
                    {"message": f"a call handed to the loop failed: {call!r}", "exception": exc}
                )


_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Inbox] = weakref.WeakKeyDictionary()


class Remote(Generic[T]):
    """A coroutine running on another thread's loop, seen from the service's loop."""

    def __init__(self, coroutine: Coroutine[Any, Any, T], there: Inbox, home: Inbox) -> None:
        self._loop = loop = there.loop
        self._done: asyncio.Future[T] = home.loop.create_future()
        self._task: asyncio.Task[T] | None = None
        self._cancelled = False

        def start() -> None:
            if self._cancelled:
                coroutine.close()
                home.put(self._settle, None)
                return
            self._task = loop.create_task(coroutine)
            self._task.add_done_callback(lambda t: home.put(self._settle, t))

        there.put(start)

    def _settle(self, task: asyncio.Task[T] | None) -> None:
        if self._done.done():
            return
        if task is None or task.cancelled():
            self._done.cancel()
        elif (error := task.exception()) is not None:
            self._done.set_exception(error)
        else:
            self._done.set_result(task.result())

    def cancel(self) -> None:
        """Cancel the task on its loop (its `result()` then raises `CancelledError`)."""
        self._cancelled = True

        def stop() -> None:
            if self._task is not None:
                self._task.cancel()

        self._loop.call_soon_threadsafe(stop)

    def done(self) -> bool:
        """Whether its task has ended (as seen on the service's loop)."""
        return self._done.done()

    def returned(self) -> bool:
        """Whether its task has ended with a value (`value()`), not raised nor cancelled."""
        done = self._done
        return done.done() and not done.cancelled() and done.exception() is None

    def value(self) -> T:
        """What the coroutine returned (once `returned()`)."""
        return self._done.result()

    async def result(self) -> T:
        """What the coroutine returned or raised, once its task has ended (shielded: a
        cancelled caller leaves the task alone, see `cancel`)."""
        return await asyncio.shield(self._done)


class RunLoops:
    """`n` event loops on their own threads (see the module docstring)."""

    def __init__(self, n: int) -> None:
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._threads: list[threading.Thread] = []
        for index in range(max(1, n)):
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name=f"converge-run-loop-{index}", daemon=True
            )
            thread.start()
            self._loops.append(loop)
            self._threads.append(thread)
        self._next = itertools.cycle([Inbox(loop) for loop in self._loops])

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Remote[T]:
        """Run `coroutine` on the next loop (called on the service's loop)."""
        return Remote(coroutine, next(self._next), Inbox.of(asyncio.get_running_loop()))

    async def close(self, on_close: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Run `on_close()` on every loop, then stop the loops and join their threads."""
        for loop in self._loops:
            future = asyncio.run_coroutine_threadsafe(on_close(), loop)
            try:
                await asyncio.wait_for(asyncio.wrap_future(future), CLOSE_S)
            except (TimeoutError, Exception):  # a pool that will not close must not stop shutdown
                future.cancel()
        for loop in self._loops:
            loop.call_soon_threadsafe(loop.stop)
        for thread in self._threads:
            await asyncio.to_thread(thread.join, CLOSE_S)
        for loop, thread in zip(self._loops, self._threads, strict=True):
            if not thread.is_alive():
                loop.close()
