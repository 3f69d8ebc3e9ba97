"""Retries and failovers bounded by the run's budget (`attempt_gate`, `deadline`).

Against the real loopback server; waits go to the injected fake clock.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models import ModelError, ModelErrorCode
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from ._helpers import KEYS, ask, http_model, using

WIRES = pytest.mark.parametrize("wire", ["openai", "anthropic"])


class Gate:
    """Allows `allowed` further attempts, counting how often it was asked."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.asked <= self.allowed


def budget_error(action: Callable[[], object]) -> ModelError:
    with pytest.raises(ModelError) as caught:
        action()
    assert caught.value.code is ModelErrorCode.BUDGET_EXHAUSTED
    assert not caught.value.retryable
    assert caught.value.hint
    return caught.value


@WIRES
def test_the_first_attempt_is_never_gated(server: FakeProviderServer, wire: str) -> None:
    gate = Gate(0)
    result = using(http_model(server, wire, build={"attempt_gate": gate}), lambda m: m.call(ask()))
    assert result.text
    assert gate.asked == 0


@WIRES
def test_a_closed_gate_stops_the_retry_and_names_the_last_error(
    server: FakeProviderServer, wire: str
) -> None:
    server.reset(FakeReply(status=500))
    clock = FakeClock()
    model = http_model(server, wire, clock=clock, build={"attempt_gate": Gate(0)})
    error = budget_error(lambda: using(model, lambda m: m.call(ask())))
    assert "budget allows no further attempt" in str(error)
    assert "E_PROVIDER" in str(error)
    assert "HTTP 500" in str(error)
    assert len(server.requests) == 1
    assert clock.sleeps == []  # refused before waiting


@WIRES
def test_the_gate_is_asked_before_every_retry(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(status=503))
    clock, gate = FakeClock(), Gate(2)
    model = http_model(server, wire, clock=clock, retries=5, build={"attempt_gate": gate})
    budget_error(lambda: using(model, lambda m: m.call(ask())))
    assert gate.asked == 3
    assert len(server.requests) == 3
    assert len(clock.sleeps) == 2


@WIRES
def test_a_closed_gate_stops_rate_limit_failover(server: FakeProviderServer, wire: str) -> None:
    server.queue(FakeReply(status=429, retry_after="30"))
    model = http_model(server, wire, accounts=("main", "backup"), build={"attempt_gate": Gate(0)})
    error = budget_error(lambda: using(model, lambda m: m.call(ask())))
    assert "E_RATE_LIMITED" in str(error)
    assert [r.api_key for r in server.requests] == [KEYS["main"]]


@WIRES
def test_a_closed_gate_stops_auth_failover(server: FakeProviderServer, wire: str) -> None:
    server.reject_key(KEYS["main"])
    model = http_model(server, wire, accounts=("main", "backup"), build={"attempt_gate": Gate(0)})
    error = budget_error(lambda: using(model, lambda m: m.call(ask())))
    assert "E_AUTH" in str(error)
    assert KEYS["main"] not in str(error)  # the server echoed the key; it stays redacted
    assert len(server.requests) == 1


@WIRES
def test_no_retry_starts_past_the_deadline(server: FakeProviderServer, wire: str) -> None:
    server.queue(FakeReply(status=429, retry_after="2"))
    clock = FakeClock(start=100.0)
    model = http_model(server, wire, clock=clock, build={"deadline": 101.5})
    error = budget_error(lambda: using(model, lambda m: m.call(ask())))
    assert "deadline" in str(error)
    assert "E_RATE_LIMITED" in str(error)
    assert clock.sleeps == []
    assert len(server.requests) == 1


@WIRES
def test_a_retry_that_starts_before_the_deadline_runs(
    server: FakeProviderServer, wire: str
) -> None:
    server.queue(FakeReply(status=429, retry_after="2"))
    clock = FakeClock(start=100.0)
    model = http_model(server, wire, clock=clock, build={"deadline": 103.0})
    assert using(model, lambda m: m.call(ask())).text
    assert clock.sleeps == [2.0]


@WIRES
def test_a_retry_that_would_start_at_the_deadline_is_refused(
    server: FakeProviderServer, wire: str
) -> None:
    """The deadline bounds the attempt itself: one starting at it would have no time."""
    server.queue(FakeReply(status=429, retry_after="2"))
    clock = FakeClock(start=100.0)
    model = http_model(server, wire, clock=clock, build={"deadline": 102.0})
    error = budget_error(lambda: using(model, lambda m: m.call(ask())))
    assert "deadline" in str(error)
    assert len(server.requests) == 1
