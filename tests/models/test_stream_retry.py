"""A streamed call that times out after its first chunk: retried only when nothing
reached the caller (a plain `call` discards the partial text)."""

from __future__ import annotations

import pytest

from converge_dsl.models import ModelError, ModelErrorCode
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from ._helpers import ask, http_model, using

WIRES = pytest.mark.parametrize("wire", ["openai", "anthropic"])
SLOW = FakeReply(text="slow slow slow slow slow slow slow slow", chunks=8, drip_s=0.1)


@WIRES
def test_plain_call_over_a_stream_is_retried_after_a_timeout_mid_stream(
    server: FakeProviderServer, wire: str
) -> None:
    server.reset(FakeReply(text="the second answer"))
    server.queue(SLOW)
    result = using(
        http_model(server, wire, stream=True, timeout_s=0.55, retries=2),
        lambda m: m.call(ask()),
    )
    assert result.text == "the second answer"
    assert len(server.requests) == 2


@WIRES
def test_streaming_call_is_not_retried_once_an_increment_was_delivered(
    server: FakeProviderServer, wire: str
) -> None:
    server.reset(FakeReply(text="the second answer"))
    server.queue(SLOW)
    pieces: list[str] = []
    with pytest.raises(ModelError) as caught:
        using(
            http_model(server, wire, timeout_s=0.55, retries=2),
            lambda m: m.call_streaming(ask(), pieces.append),
        )
    assert caught.value.code is ModelErrorCode.TIMEOUT
    assert pieces  # the caller saw the start of the answer ...
    assert len(server.requests) == 1  # ... so it is not asked again
