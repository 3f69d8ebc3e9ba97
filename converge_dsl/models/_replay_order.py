"""The order a replay answers in: the order the answers were recorded (docs/architecture.md §8).

A cassette's lines are written as calls finish, so their order is the order in
which the recorded run saw its answers. Concurrent suggestors and agents then
reserved budget, made further calls or were refused in that order. A replay
answers at once, so without help its calls would finish in the order they
started, and a run under a budget could take other branches (another agent
refused, another request made, `E_REPLAY_MISS`). `ReplayOrder` holds each
answer back until every earlier recorded answer this run will ask for has been
given. A recorded answer nobody asks for (the run changed) cannot hold the
others forever: once no answer has been given for `STALL_TICKS` turns of the
event loop, the waiting calls go on in line order.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterable

STALL_TICKS = 64


class ReplayOrder:
    """The lines of one cassette still to be answered, shared by the replays of one run."""

    __slots__ = ("_given", "_pending", "_waiting")

    def __init__(self) -> None:
        self._pending: list[int] = []
        self._waiting: list[int] = []
        self._given = 0

    def expect(self, lines: Iterable[int]) -> None:
        """Add the line numbers of a cassette (lines already known are kept once)."""
        self._pending = sorted(set(self._pending) | set(lines))

    async def turn(self, line: int) -> None:
        """Wait until every pending line before `line` was answered (or the replay stalls)."""
        bisect.insort(self._waiting, line)
        try:
            idle, given = 0, self._given
            while self._pending and self._pending[0] < line:
                await asyncio.sleep(0)
                if self._given != given:
                    idle, given = 0, self._given
                    continue
                idle += 1
                if idle > STALL_TICKS and self._waiting[0] == line:
                    break  # nothing moves: the earliest waiting call goes first
        finally:
            self._waiting.remove(line)

    def answered(self, line: int) -> None:
        """`line` was answered (a line answered again, or never pending, changes nothing)."""
        index = bisect.bisect_left(self._pending, line)
        if index < len(self._pending) and self._pending[index] == line:
            del self._pending[index]
        self._given += 1
