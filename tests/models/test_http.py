"""The OpenAI-compatible and Anthropic adapters against a real server on 127.0.0.1."""

from __future__ import annotations

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models import ModelError, ModelErrorCode, ModelReturn, ToolCallPart
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from ._helpers import KEYS, ask, http_model, using

WIRES = pytest.mark.parametrize("wire", ["openai", "anthropic"])


@WIRES
def test_plain_call_returns_text_usage_and_account(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(text="Hello there, friend."))
    result = using(http_model(server, wire), lambda m: m.call(ask()))
    assert result.text == "Hello there, friend."
    assert result.stop_reason == "end_turn"
    assert result.usage.input_tokens == 10
    assert result.account == "main"
    assert result.model_id == f"{wire}:fake-model"
    seen = server.requests[0]
    assert seen.api_key == KEYS["main"]
    assert seen.body["model"] == "fake-model"
    assert not seen.body.get("stream")


@WIRES
def test_streaming_gives_increments_and_the_same_return(
    server: FakeProviderServer, wire: str
) -> None:
    server.reset(FakeReply(text="one two three four five six", chunks=6))
    pieces: list[str] = []
    streamed = using(http_model(server, wire), lambda m: m.call_streaming(ask(), pieces.append))
    plain = using(http_model(server, wire), lambda m: m.call(ask()))
    assert len(pieces) == 6
    assert "".join(pieces) == streamed.text
    assert streamed == plain
    assert server.requests[0].body["stream"] is True


@WIRES
def test_speculating_hands_over_tool_calls_once_complete(
    server: FakeProviderServer, wire: str
) -> None:
    calls = (("context_read", {"key": "strategies"}), ("context_read", {"key": "seeds"}))
    server.reset(FakeReply(text="Let me look.", tool_calls=calls))
    early: list[ToolCallPart] = []
    result = using(
        http_model(server, wire),
        lambda m: m.call_speculating(ask(tools=True), lambda _: None, early.append),
    )
    assert result.stop_reason == "tool_use"
    assert tuple(early) == result.tool_calls
    assert [(c.name, dict(c.input)) for c in result.tool_calls] == [
        ("context.read", {"key": "strategies"}),
        ("context.read", {"key": "seeds"}),
    ]
    tools = server.requests[0].body["tools"]
    assert "context_read" in str(tools)  # provider-safe tool name on the wire
    plain = using(http_model(server, wire), lambda m: m.call(ask(tools=True)))
    assert plain.tool_calls == result.tool_calls


@WIRES
def test_429_honours_retry_after_then_succeeds(server: FakeProviderServer, wire: str) -> None:
    server.queue(FakeReply(status=429, retry_after="1.5"), FakeReply(status=429, retry_after="2"))
    clock = FakeClock()
    result = using(http_model(server, wire, clock=clock), lambda m: m.call(ask()))
    assert result.text
    assert clock.sleeps == [1.5, 2.0]
    assert len(server.requests) == 3


@WIRES
def test_429_fails_over_to_the_next_account_without_waiting(
    server: FakeProviderServer, wire: str
) -> None:
    server.queue(FakeReply(status=429, retry_after="30"))
    clock = FakeClock()
    model = http_model(server, wire, accounts=("main", "backup"), clock=clock)
    result = using(model, lambda m: m.call(ask()))
    assert result.account == "backup"
    assert clock.sleeps == []
    assert [r.api_key for r in server.requests] == [KEYS["main"], KEYS["backup"]]
    roster = model.account_roster()
    assert roster is not None
    assert roster.selected == "backup"


@WIRES
def test_401_on_one_key_fails_over_and_sticks(server: FakeProviderServer, wire: str) -> None:
    server.reject_key(KEYS["main"])
    model = http_model(server, wire, accounts=("main", "backup"))

    async def twice(m: object) -> list[ModelReturn]:
        return [await model.call(ask()), await model.call(ask())]

    results = using(model, twice)
    assert [r.account for r in results] == ["backup", "backup"]
    assert [r.api_key for r in server.requests] == [KEYS["main"], KEYS["backup"], KEYS["backup"]]


@WIRES
def test_401_on_every_key_is_e_auth_without_the_key(server: FakeProviderServer, wire: str) -> None:
    server.reject_key(KEYS["main"])
    server.reject_key(KEYS["backup"])
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire, accounts=("main", "backup")), lambda m: m.call(ask()))
    error = caught.value
    assert error.code is ModelErrorCode.AUTH
    assert not error.retryable
    assert "main, backup" in str(error)
    assert KEYS["main"] not in str(error)  # the server echoed the key; it was redacted
    assert KEYS["backup"] not in str(error)
    assert "[REDACTED]" in str(error)


@WIRES
def test_500_is_retried_with_backoff(server: FakeProviderServer, wire: str) -> None:
    server.queue(FakeReply(status=500), FakeReply(status=500))
    clock = FakeClock()
    result = using(http_model(server, wire, clock=clock), lambda m: m.call(ask()))
    assert result.text
    assert len(clock.sleeps) == 2
    assert 0.25 <= clock.sleeps[0] <= 0.5  # base 0.5 s, jittered into [half, full]
    assert 0.5 <= clock.sleeps[1] <= 1.0


@WIRES
def test_500_exhausting_retries_is_e_provider(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(status=500))
    clock = FakeClock()
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire, clock=clock, retries=2), lambda m: m.call(ask()))
    assert caught.value.code is ModelErrorCode.PROVIDER
    assert caught.value.retryable
    assert "HTTP 500" in str(caught.value)
    assert len(server.requests) == 3
    assert len(clock.sleeps) == 2


@WIRES
def test_400_is_not_retried(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(status=400))
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire), lambda m: m.call(ask()))
    assert caught.value.code is ModelErrorCode.PROVIDER
    assert not caught.value.retryable
    assert len(server.requests) == 1


@WIRES
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("count", [-1_000_000, 10**12])
def test_negative_or_absurd_usage_is_e_wire(
    server: FakeProviderServer, wire: str, stream: bool, count: int
) -> None:
    server.reset(FakeReply(input_tokens=count))
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire, stream=stream), lambda m: m.call(ask()))
    assert caught.value.code is ModelErrorCode.WIRE
    assert f"is {count}, not between 0 and" in caught.value.message
    assert len(server.requests) == 1


@WIRES
@pytest.mark.parametrize("stream", [False, True])
def test_garbage_json_is_e_wire(server: FakeProviderServer, wire: str, stream: bool) -> None:
    server.reset(FakeReply(garbage=True))
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire, stream=stream), lambda m: m.call(ask()))
    assert caught.value.code is ModelErrorCode.WIRE
    assert len(server.requests) == 1


@WIRES
@pytest.mark.parametrize("cut", ["abort", "eof"])
def test_cut_stream_raises_and_never_returns_partial_text(
    server: FakeProviderServer, wire: str, cut: str
) -> None:
    server.reset(FakeReply(text="a long answer that will be cut in the middle", chunks=8, cut=cut))  # type: ignore[arg-type]
    pieces: list[str] = []
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire), lambda m: m.call_streaming(ask(), pieces.append))
    assert caught.value.code is ModelErrorCode.WIRE
    assert pieces  # some increments arrived before the cut ...
    assert len(server.requests) == 1  # ... so nothing is retried (no duplicate increments)


@WIRES
def test_delay_beyond_total_timeout_is_e_timeout(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(delay_s=0.6))
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire, timeout_s=0.2, retries=0), lambda m: m.call(ask()))
    assert caught.value.code is ModelErrorCode.TIMEOUT
    assert caught.value.retryable


@WIRES
def test_slow_drip_within_read_timeout_completes(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(text="drip drip drip", chunks=3, drip_s=0.05))
    pieces: list[str] = []
    result = using(
        http_model(server, wire, read_timeout_s=1, timeout_s=5),
        lambda m: m.call_streaming(ask(), pieces.append),
    )
    assert result.text == "drip drip drip"
    assert len(pieces) == 3


@WIRES
def test_slow_drip_past_total_timeout_is_e_timeout(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(text="drip drip drip drip", chunks=8, drip_s=0.1))
    with pytest.raises(ModelError) as caught:
        using(
            http_model(server, wire, read_timeout_s=1, timeout_s=0.35, retries=0),
            lambda m: m.call_streaming(ask(), lambda _: None),
        )
    assert caught.value.code is ModelErrorCode.TIMEOUT


@WIRES
def test_read_timeout_is_e_timeout(server: FakeProviderServer, wire: str) -> None:
    server.reset(FakeReply(delay_s=0.5))
    with pytest.raises(ModelError) as caught:
        using(http_model(server, wire, read_timeout_s=0.1, retries=0), lambda m: m.call(ask()))
    assert caught.value.code is ModelErrorCode.TIMEOUT
    assert "read timeout" in str(caught.value)


def test_unreachable_server_is_e_provider_after_retries() -> None:
    from converge_dsl.models.fakeserver import FakeProviderServer as Server

    closed = Server()
    closed.stop()  # bound then closed: nothing listens on its port any more
    clock = FakeClock()
    with pytest.raises(ModelError) as caught:
        using(http_model(closed, "openai", clock=clock, retries=1), lambda m: m.call(ask()))
    assert caught.value.code is ModelErrorCode.PROVIDER
    assert "check base_url" in str(caught.value)
    assert len(clock.sleeps) == 1


def test_keys_never_appear_in_reprs(server: FakeProviderServer) -> None:
    model = http_model(server, "openai", accounts=("main", "backup"))
    text = repr(model) + repr(model.account_roster()) + repr(model.provider_account())
    assert "main" in text
    assert KEYS["main"] not in text
    assert KEYS["backup"] not in text


def test_select_account_unknown_label_keeps_selection(server: FakeProviderServer) -> None:
    model = http_model(server, "anthropic", accounts=("main", "backup"))
    model.select_account("backup")
    model.select_account("nope")
    binding = model.provider_account()
    assert binding is not None
    assert (binding.provider, binding.label) == ("anthropic", "backup")
    result = using(model, lambda m: m.call(ask()))
    assert result.account == "backup"


def test_confidential_requests_only_go_to_local_servers() -> None:
    import dataclasses
    import random
    from pathlib import Path

    from converge_dsl.models import build_model

    remote = build_model(
        "far",
        {"adapter": "openai", "base_url": "https://api.example.com/v1", "model": "m"},
        base_dir=Path("."),
        env={},
        clock=FakeClock(),
        rng=random.Random(1),
    )
    secret = dataclasses.replace(ask(), confidential=True)
    with pytest.raises(ModelError) as caught:
        using(remote, lambda m: m.call(secret))
    assert caught.value.code is ModelErrorCode.CONFIDENTIAL


def test_confidential_requests_are_accepted_by_a_loopback_server(
    server: FakeProviderServer,
) -> None:
    import dataclasses

    secret = dataclasses.replace(ask(), confidential=True)
    assert using(http_model(server, "openai"), lambda m: m.call(secret)).text


def test_one_client_keeps_connections_alive_and_spreads_concurrent_calls(
    server: FakeProviderServer,
) -> None:
    import asyncio

    server.reset(FakeReply(text="ok", delay_s=0.2))
    model = http_model(server, "openai")

    async def rounds(m: object) -> None:
        for _ in range(2):
            await asyncio.gather(*(model.call(ask(f"q{i}")) for i in range(8)))

    using(model, rounds)
    first = {r.client_port for r in server.requests[:8]}
    second = {r.client_port for r in server.requests[8:]}
    assert len(first) == 8  # eight concurrent calls, eight connections
    assert second == first  # reused, and still one connection per concurrent call
