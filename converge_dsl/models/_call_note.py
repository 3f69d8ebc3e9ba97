"""A note a model call's layers pass upwards: whether the answer came from the answer cache.

The metered call and the traced call set `CALL_NOTE` around one model call; the answer
cache (`caching`) marks it cached on a hit. It lives apart from the cache so that the
meter can read it without importing the cache.
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["CALL_NOTE", "CallNote", "mark_cached"]


class CallNote:
    """What the layers under a model call tell the layers above it (`cached`)."""

    __slots__ = ("cached",)

    def __init__(self) -> None:
        self.cached = False


CALL_NOTE: ContextVar[CallNote | None] = ContextVar("converge_dsl_call_note", default=None)
"""Set by a caller (the metered call, the traced call) around one model call; a cache hit
marks it."""


def mark_cached() -> None:
    note = CALL_NOTE.get()
    if note is not None:
        note.cached = True
