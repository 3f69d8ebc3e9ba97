"""A run's events as the service's state holds them (`RunStore`'s rows of `events`), and
the numbers its streams sent (`sent`).

Consecutive records handed over together are one row: `seq` the number of the first,
`line` the records joined by newlines (see `_store`). A resumed run numbers its events
after the stored ones and after every number a stream of it has sent (`next_event`): a
stream notes the number past the events it sends before it sends them (`mark_sent`), so
a run continued after a kill, which lost the events it had not stored, gives none of
their numbers to other events (the numbers are skipped).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ._store_sql import INSERT_EVENTS, INSERT_SENT, Statement, stored_past_sql


class StoredEvents:
    """The event rows of a `RunStore` (its base: `_read` and `_write` are the store's)."""

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        raise NotImplementedError

    @staticmethod
    def event_statements(run: str, events: Sequence[tuple[int, str]]) -> list[Statement]:
        """The statement storing `events` of `run`, consecutive records handed over together,
        as one row (none for no events; to commit with a checkpoint record)."""
        if not events:
            return []
        first = events[0][0]
        assert events[-1][0] == first + len(events) - 1, "the records of a row are consecutive"
        lines = "\n".join(record for _, record in events)
        return [(INSERT_EVENTS, (run, first, lines))]

    def add_events(self, run: str, events: Sequence[tuple[int, str]]) -> None:
        if events:
            self._write(self.event_statements(run, events))

    def events(self, run: str, after: int = -1) -> Iterator[tuple[int, str]]:
        """The stored events of `run` numbered above `after`, in order, as trace lines."""
        from ._events import render

        # from the row holding the event `after` (its first number is the largest not
        # above it), or the first row
        rows = self._read(
            "SELECT seq, line FROM events WHERE run = ?1 AND seq >= COALESCE("
            "(SELECT MAX(seq) FROM events WHERE run = ?1 AND seq <= ?2), 0) ORDER BY seq",
            (run, after),
        )
        for first, lines in rows:
            for offset, record in enumerate(str(lines).split("\n")):
                seq = int(first) + offset
                if seq > after:
                    yield seq, render(seq, record)

    def stored_past(self, run: str) -> int:
        """The number past the stored events of `run` (0: none stored)."""
        return int(self._read(f"SELECT {stored_past_sql('?')}", (run,))[0][0])

    def next_event(self, run: str) -> int:
        """The number the next event of `run` takes (a resumed run goes on numbering):
        past its stored events and every number a stream of it sent (`mark_sent`)."""
        sent = self._read("SELECT past FROM sent WHERE run = ?", (run,))
        return max(self.stored_past(run), int(sent[0][0]) if sent else 0)

    def mark_sent(self, run: str, past: int) -> None:
        """Note that a stream of `run` may send events numbered below `past` (committed
        before it sends them: they may be lost in a kill, their numbers are not); nothing
        once the run paused or ended, its events all stored then (`SETTLED_SENT`)."""
        self._write([(INSERT_SENT, (run, past, run))])
