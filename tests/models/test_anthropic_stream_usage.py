"""Anthropic streamed usage: the input count may arrive in message_start or message_delta."""

from __future__ import annotations

import json
from typing import Any

import pytest

from converge_dsl.models._anthropic import AnthropicStream
from converge_dsl.models._sse import SseEvent
from converge_dsl.models._wire import ToolNames


def _events(start_input: int, delta_usage: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_start",
            "message": {"usage": {"input_tokens": start_input, "output_tokens": 1}},
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "hi"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": delta_usage},
        {"type": "message_stop"},
    ]


def _usage(events: list[dict[str, Any]]) -> tuple[int, int]:
    stream = AnthropicStream(ToolNames(()), lambda _text: None, lambda _call: None)
    for data in events:
        stream.feed(SseEvent(str(data["type"]), json.dumps(data)))
    usage = stream.finish().usage
    assert usage is not None
    return usage.input_tokens, usage.output_tokens


@pytest.mark.parametrize(
    ("start_input", "delta_usage", "expected"),
    [
        (0, {"input_tokens": 17, "output_tokens": 5}, (17, 5)),  # only in message_delta
        (12, {"output_tokens": 5}, (12, 5)),  # only in message_start
        (12, {"input_tokens": 0, "output_tokens": 5}, (12, 5)),  # a zero does not erase it
        (12, {"input_tokens": 15, "output_tokens": 5}, (15, 5)),  # the later non-zero wins
    ],
)
def test_input_tokens_come_from_start_or_delta(
    start_input: int, delta_usage: dict[str, Any], expected: tuple[int, int]
) -> None:
    assert _usage(_events(start_input, delta_usage)) == expected
