"""Reading `Retry-After`: seconds, milliseconds (`retry-after-ms`) or an HTTP date.

A date is converted with the injected wall clock (epoch seconds), never the
global one, so tests are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime


def retry_after_seconds(headers: Mapping[str, str], wall_time: Callable[[], float]) -> float | None:
    """Seconds to wait, from `retry-after-ms` or `retry-after` (seconds or an HTTP date,
    read against `wall_time`; a date already past means no wait). Unreadable: None."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        seconds: float | None
        try:
            seconds = float(value) * scale
        except ValueError:
            seconds = _seconds_until(value, wall_time) if scale == 1.0 else None
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def _seconds_until(http_date: str, wall_time: Callable[[], float]) -> float | None:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC by RFC 5322
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - wall_time())
