"""Runs on loops of their own threads: results, errors and cancellation come back whole."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from converge_dsl.serve._loops import Inbox, RunLoops


async def _noop() -> None:
    return None


def test_results_errors_and_cancellation() -> None:
    async def main() -> None:
        loops = RunLoops(2)
        home = threading.get_ident()
        ran_on: list[int] = []

        async def work(value: int) -> int:
            ran_on.append(threading.get_ident())
            await asyncio.sleep(0.01)
            return value * 2

        async def fail() -> None:
            raise ValueError("boom")

        stopped = threading.Event()

        async def forever() -> None:
            try:
                await asyncio.sleep(60)
            finally:
                stopped.set()

        assert [await loops.submit(work(n)).result() for n in range(4)] == [0, 2, 4, 6]
        assert home not in ran_on
        assert len(set(ran_on)) == 2  # round robin
        with pytest.raises(ValueError, match="boom"):
            await loops.submit(fail()).result()
        remote = loops.submit(forever())
        await asyncio.sleep(0.05)
        remote.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(remote.result(), 5)
        assert stopped.is_set()  # the task really ended before result() said so
        await loops.close(_noop)

    asyncio.run(main())


def test_calls_handed_in_a_burst_wake_the_loop_once_and_run_in_order() -> None:
    """Ten calls handed from another thread before the loop runs the first: one wake-up
    of the loop (`call_soon_threadsafe`); a call that raises is reported to the loop's
    exception handler and the others still run, in the order handed."""

    async def main() -> tuple[list[int], int, list[str]]:
        loop = asyncio.get_running_loop()
        wakes = 0
        threadsafe = loop.call_soon_threadsafe

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return threadsafe(*args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign,assignment]
        reported: list[str] = []
        loop.set_exception_handler(lambda _, context: reported.append(context["message"]))
        inbox, ran, done = Inbox(loop), list[int](), asyncio.Event()

        def fail() -> None:
            raise RuntimeError("a failing call")

        def hand() -> None:  # another thread, while the loop awaits `done`
            for n in range(10):
                inbox.put(ran.append, n)
                if n == 4:
                    inbox.put(fail)
            inbox.put(done.set)

        thread = threading.Thread(target=hand)
        thread.start()
        thread.join()  # all handed before the loop runs any
        await asyncio.wait_for(done.wait(), 10)
        return ran, wakes, reported

    ran, wakes, reported = asyncio.run(main())
    assert ran == list(range(10))
    assert wakes == 1
    assert len(reported) == 1
    assert "a call handed to the loop failed" in reported[0]


def test_a_future_of_another_thread_is_mirrored_through_the_inbox() -> None:
    """`Inbox.future`: the result, the error or the cancellation of a future set on
    another thread reaches the loop's future; one cancelled on the loop stays so."""
    from concurrent.futures import Future

    async def main() -> None:
        inbox = Inbox.of(asyncio.get_running_loop())
        assert Inbox.of(asyncio.get_running_loop()) is inbox
        done, failed, cancelled, left = (Future[int]() for _ in range(4))
        mirrors = [inbox.future(f) for f in (done, failed, cancelled, left)]
        mirrors[3].cancel()

        def settle() -> None:
            done.set_result(7)
            failed.set_exception(ValueError("boom"))
            cancelled.cancel()
            left.set_result(1)

        setter = threading.Thread(target=settle)
        setter.start()
        setter.join()
        assert await mirrors[0] == 7
        with pytest.raises(ValueError, match="boom"):
            await mirrors[1]
        with pytest.raises(asyncio.CancelledError):
            await mirrors[2]
        await asyncio.sleep(0.01)  # the inbox ran the hand-off of `left`
        assert mirrors[3].cancelled()

    asyncio.run(main())
