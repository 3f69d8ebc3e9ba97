"""Runs on loops of their own threads: results, errors and cancellation come back whole."""

from __future__ import annotations

import asyncio
import threading

import pytest

from converge_dsl.serve._loops import RunLoops


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
