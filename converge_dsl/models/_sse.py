"""Server-sent events: an incremental decoder fed one line at a time.

Follows the WHATWG event-stream rules that matter for model APIs: `data:`
lines accumulate (joined by newlines), `event:` names the event, a blank line
dispatches, lines starting with `:` are comments, other fields are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    data: str


class SseDecoder:
    __slots__ = ("_data", "_event")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed_line(self, line: str) -> SseEvent | None:
        """Consume one line (without its line break); return an event when one completes."""
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SseEvent(self._event or "message", "\n".join(self._data))
            self._event = ""
            self._data = []
            return event
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    @property
    def pending(self) -> bool:
        """True when an event was started but never dispatched (the stream stopped mid-event)."""
        return bool(self._data)
