"""The timeout model (docs/architecture.md §8, "Timeouts"), on a loopback server with scaled delays.

`timeout_s` bounds the whole call; `read_timeout_s` defaults to it (no hidden
smaller default); `connect_timeout_s` never exceeds it. The delays are scaled
down: an answer after 0.7 s within `timeout_s: 1.2` stands for one after 70 s
within `timeout_s: 120`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from converge_dsl.clock import SystemClock
from converge_dsl.models import ModelError, ModelErrorCode
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply
from converge_dsl.models.http import HttpModel

from ._helpers import ask, http_model, using

WIRES = ["openai", "anthropic"]


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as running:
        yield running


def _limits(model: object) -> tuple[float, float, float]:
    assert isinstance(model, HttpModel)
    limits = model._client._limits
    return limits.timeout_s, limits.connect_timeout_s, limits.read_timeout_s


def test_no_hidden_default_is_smaller_than_timeout_s(server: FakeProviderServer) -> None:
    assert _limits(http_model(server, "openai", timeout_s=120)) == (120, 10, 120)
    assert _limits(http_model(server, "openai")) == (120, 10, 120)
    assert _limits(http_model(server, "openai", timeout_s=5)) == (5, 5, 5)
    explicit = http_model(server, "openai", timeout_s=120, read_timeout_s=30, connect_timeout_s=3)
    assert _limits(explicit) == (120, 3, 30)


@pytest.mark.parametrize("wire", WIRES)
def test_a_slow_answer_within_timeout_s_succeeds(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(text="late but fine", delay_s=0.7))
    model = http_model(server, wire, timeout_s=1.2, retries=0, clock=SystemClock())
    answer = using(model, lambda m: m.call(ask()))
    assert answer.text == "late but fine"


@pytest.mark.parametrize("wire", WIRES)
def test_a_call_past_timeout_s_fails_near_it(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(text="too late", delay_s=0.7))
    model = http_model(server, wire, timeout_s=0.3, retries=0, clock=SystemClock())
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        using(model, lambda m: m.call(ask()))
    elapsed = time.monotonic() - started
    assert caught.value.code is ModelErrorCode.TIMEOUT
    assert 0.25 <= elapsed < 0.6
    assert "0.3 s" in caught.value.message


def test_timeout_s_bounds_every_attempt_together(server: FakeProviderServer) -> None:
    """Retries do not stretch the call: five slow failures stop at timeout_s, not at 5 x 0.4 s."""
    server.reset(FakeReply(status=500, retry_after="0", delay_s=0.4))
    model = http_model(server, "openai", timeout_s=1.0, retries=5, clock=SystemClock())
    started = time.monotonic()
    with pytest.raises(ModelError) as caught:
        using(model, lambda m: m.call(ask()))
    elapsed = time.monotonic() - started
    assert elapsed < 1.4
    assert caught.value.code is ModelErrorCode.TIMEOUT
    assert len(server.requests) <= 3
