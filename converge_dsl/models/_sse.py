"""Server-sent events: an incremental decoder fed one line at a time.

Follows the WHATWG event-stream rules that matter for model APIs: `data:`
lines accumulate (joined by newlines), `event:` names the event, a blank line
dispatches, lines starting with `:` are comments, other fields are ignored.
The data of one event is at most `max_event_bytes` (UTF-8) bytes: past it,
`on_cap()` raises before more is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    data: str


def _no_cap() -> None:
    return None


class SseDecoder:
    __slots__ = ("_cap", "_data", "_event", "_on_cap", "_size")

    def __init__(
        self, max_event_bytes: int | None = None, on_cap: Callable[[], None] = _no_cap
    ) -> None:
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._cap = max_event_bytes
        self._on_cap = on_cap

    def feed_line(self, line: str) -> SseEvent | None:
        """Consume one line (without its line break); return an event when one completes."""
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data))
            self._event = ""
            self._data = []
            self._size = 0
            return event
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._size += len(value.encode("utf-8", errors="replace")) + 1
            if self._cap is not None and self._size > self._cap:
                self._on_cap()
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    @property
    def pending(self) -> bool:
        """True when an event was started but never dispatched (the stream stopped mid-event)."""
        return bool(self._data)
