"""What a model call's layers tell each other: whether the answer came from the answer cache,
and what the cache said before the call was reserved.

The metered call and the traced call set `CALL_NOTE` around one model call; the answer
cache (`caching`) marks it cached on a hit. The metered call asks the cache first
(`cached_answer`, through the wrappers) and sets `CACHE_PROBE` around the call it then
makes: a hit is answered with no reservation, a miss is not looked up a second time. It
lives apart from the cache so that the meter can read it without importing the cache.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from converge_dsl.models.port import ModelRequest, ModelReturn

__all__ = ["CACHE_PROBE", "CALL_NOTE", "CacheProbe", "CallNote", "mark_cached"]


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


class CacheProbe:
    """The answer cache's look-up of `request` made before the call was reserved: its
    `answer` (None: a miss, which the cache need not look up again)."""

    __slots__ = ("answer", "request")

    def __init__(self, request: ModelRequest, answer: ModelReturn | None) -> None:
        self.request = request
        self.answer = answer


CACHE_PROBE: ContextVar[CacheProbe | None] = ContextVar("converge_dsl_cache_probe", default=None)
"""Set by the metered call around the call it makes after asking the cache; the cache uses
it for that very request (the same object) only."""
