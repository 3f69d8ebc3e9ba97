"""`Retry-After` as seconds, milliseconds or an HTTP date read against an injected wall clock."""

from __future__ import annotations

from email.utils import format_datetime, parsedate_to_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.clock import FakeClock
from converge_dsl.models._retry_after import retry_after_seconds
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from ._helpers import ask, http_model, using

DATE = "Wed, 21 Oct 2015 07:28:00 GMT"
EPOCH = parsedate_to_datetime(DATE).timestamp()


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
def test_http_date_is_waited_for_on_the_wall_clock(server: FakeProviderServer, wire: str) -> None:
    server.queue(FakeReply(status=429, retry_after=DATE))
    clock = FakeClock()
    model = http_model(server, wire, clock=clock, build={"wall_time": lambda: EPOCH - 7.5})
    assert using(model, lambda m: m.call(ask())).text
    assert clock.sleeps == [7.5]


@pytest.mark.parametrize(
    ("headers", "now", "expected"),
    [
        ({"retry-after": DATE}, EPOCH - 3, 3.0),
        ({"retry-after": DATE}, EPOCH + 60, 0.0),  # a date already past: no wait
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 -0000"}, EPOCH - 1, 1.0),  # naive: UTC
        ({"retry-after": "Wed, 21 Oct 2015 09:28:00 +0200"}, EPOCH - 4, 4.0),
        ({"retry-after": "2.5"}, 0.0, 2.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.0, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 0.0, 9.0),
        ({"retry-after": "next tuesday"}, 0.0, None),
        ({"retry-after": "-3"}, 0.0, None),
        ({"retry-after": "nan"}, 0.0, None),
        ({}, 0.0, None),
    ],
)
def test_retry_after_forms(headers: dict[str, str], now: float, expected: float | None) -> None:
    assert retry_after_seconds(headers, lambda: now) == expected


@given(st.integers(0, 4_000_000_000), st.integers(-86_400, 86_400))
def test_a_date_gives_the_seconds_until_it(when: int, offset: int) -> None:
    from datetime import UTC, datetime

    header = format_datetime(datetime.fromtimestamp(when, UTC), usegmt=True)
    seconds = retry_after_seconds({"retry-after": header}, lambda: float(when - offset))
    assert seconds == max(0.0, float(offset))
