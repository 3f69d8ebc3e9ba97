"""The clock port: time and sleeping are injected, never read from globals.

`SystemClock` is the real adapter; `FakeClock` is a public fake that tests (and
deterministic runs) use: its time only moves when something sleeps on it or
calls `advance`. asyncio is imported on the first sleep, not with this module:
`validate` reads clocks' types without ever starting an event loop.

Wall-clock time (what the trace stamps on each line as an RFC 3339 timestamp)
is a second, separate reading: `WallClock.wall()`. Both clocks here provide
it; the fake one reads `wall_start` plus the fake monotonic time elapsed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # datetime is imported on the first wall-clock reading (lean `validate`)
    from datetime import datetime

# Where a `FakeClock`'s wall time starts unless told otherwise (UTC).
FAKE_WALL_START = "2026-01-01T00:00:00+00:00"


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; only differences are meaningful."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (never negative)."""
        ...


@runtime_checkable
class WallClock(Protocol):
    def wall(self) -> datetime:
        """The current time of day, timezone-aware, in UTC."""
        ...


def rfc3339(moment: datetime) -> str:
    """`moment` as an RFC 3339 UTC timestamp with microseconds: `2026-01-01T00:00:00.000000Z`."""
    from datetime import UTC

    m = moment if moment.tzinfo is UTC else moment.astimezone(UTC)
    # Formatted by hand: a trace stamps every line, and strftime is about three times slower.
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond:06d}Z"
    )


class SystemClock:
    """The real clock: `time.monotonic`, `asyncio.sleep` and the system's time of day."""

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> datetime:
        from datetime import UTC, datetime

        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        import asyncio

        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when told to. Sleeping advances it instantly."""

    def __init__(self, start: float = 0.0, wall_start: datetime | None = None) -> None:
        self._start = start
        self._now = start
        self._wall_start = wall_start
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self._now

    def wall(self) -> datetime:
        from datetime import datetime, timedelta

        origin = self._wall_start or datetime.fromisoformat(FAKE_WALL_START)
        return origin + timedelta(seconds=self._now - self._start)

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
        import asyncio

        await asyncio.sleep(0)
