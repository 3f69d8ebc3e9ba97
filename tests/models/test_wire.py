"""Laws of the wire layer: SSE decoding, stream assembly, tool names, redaction."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.models import ModelError, ModelErrorCode, ToolCallPart
from converge_dsl.models._anthropic import AnthropicWire
from converge_dsl.models._openai import OpenAIWire
from converge_dsl.models._redact import MASK, Redactor
from converge_dsl.models._sse import SseDecoder, SseEvent
from converge_dsl.models._wire import Answer, StreamAssembler, ToolNames, WireFormat
from converge_dsl.models.fakeserver import (
    FakeReply,
    anthropic_body,
    anthropic_events,
    openai_body,
    openai_events,
)


@dataclass(frozen=True)
class Format:
    wire: WireFormat
    events: Callable[[FakeReply], list[bytes]]
    body: Callable[[FakeReply], dict[str, Any]]


FORMATS = pytest.mark.parametrize(
    "fmt",
    [
        Format(OpenAIWire(), openai_events, openai_body),
        Format(AnthropicWire(), anthropic_events, anthropic_body),
    ],
    ids=["openai", "anthropic"],
)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
names = st.from_regex(r"[a-z][a-z0-9._]{0,12}", fullmatch=True)
arguments = st.dictionaries(
    st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.integers() | texts, max_size=3
)


def decode(stream: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    events = [decoder.feed_line(line) for line in stream.decode().split("\n")]
    return [e for e in events if e is not None]


def assemble(assembler: StreamAssembler, stream: bytes) -> Answer:
    for event in decode(stream):
        assembler.feed(event)
    return assembler.finish()


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "message_start", "x"]),
            st.lists(
                st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",))),
                min_size=1,
                max_size=3,
            ),
        ),
        max_size=5,
    )
)
def test_sse_decoding_inverts_encoding(events: list[tuple[str, list[str]]]) -> None:
    wire = b""
    for name, lines in events:
        if name:
            wire += f"event: {name}\n".encode()
        wire += "".join(f"data: {line}\n" for line in lines).encode() + b": comment\n\n"
    decoded = decode(wire)
    assert decoded == [SseEvent(name or "message", "\n".join(lines)) for name, lines in events]


@FORMATS
@given(
    text=texts, chunks=st.integers(1, 10), calls=st.lists(st.tuples(names, arguments), max_size=3)
)
def test_any_chunking_assembles_the_whole_answer(
    fmt: Format, text: str, chunks: int, calls: list[tuple[str, dict[str, object]]]
) -> None:
    reply = FakeReply(text=text, tool_calls=tuple(calls), chunks=chunks)
    tool_names = ToolNames(())
    pieces: list[str] = []
    early: list[ToolCallPart] = []
    assembler = fmt.wire.assembler(tool_names, pieces.append, early.append)
    streamed = assemble(assembler, b"".join(fmt.events(reply)))
    whole = fmt.wire.parse(json.loads(json.dumps(fmt.body(reply))), tool_names)
    assert streamed.message == whole.message
    assert streamed.stop_reason == whole.stop_reason
    assert "".join(pieces) == text
    assert tuple(early) == streamed.message.tool_calls


@FORMATS
@given(cut=st.integers(0, 100))
def test_any_truncated_stream_is_e_wire(fmt: Format, cut: int) -> None:
    reply = FakeReply(text="some text to cut", tool_calls=(("t", {"a": 1}),), chunks=4)
    raw = b"".join(fmt.events(reply))
    end = (
        raw.index(b'finish_reason": "tool_calls')
        if fmt.wire.provider == "openai"
        else raw.index(b"event: message_stop")
    )
    truncated = raw[: end * cut // 100]
    assembler = fmt.wire.assembler(ToolNames(()), lambda _: None, lambda _: None)
    with pytest.raises(ModelError) as caught:
        assemble(assembler, truncated.rsplit(b"\n\n", 1)[0] + b"\n\n")
    assert caught.value.code is ModelErrorCode.WIRE


@given(st.lists(names, max_size=8))
def test_tool_names_round_trip_and_are_provider_safe(tools: list[str]) -> None:
    mapping = ToolNames(())
    wire_names = [mapping.wire(name) for name in tools]
    assert all(n.replace("_", "").replace("-", "").isalnum() for n in wire_names)
    assert [mapping.local(n) for n in wire_names] == tools
    assert len(set(wire_names)) == len(set(tools))


@given(prefix=texts, suffix=texts)
def test_redactor_masks_known_secrets_anywhere(prefix: str, suffix: str) -> None:
    secret = "k3y-VALUE-0000"
    assert secret not in Redactor([secret])(prefix + secret + suffix)
    assert MASK in Redactor([secret])(prefix + secret + suffix)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"choices": [{"message": {"content": "T\\ud800"}}]}', "holds a lone surrogate"),
        ('{"usage": {"prompt_tokens": NaN}}', "NaN is not standard JSON"),
    ],
)
def test_a_body_that_is_not_standard_json_is_e_wire(text: str, problem: str) -> None:
    from converge_dsl.models._wire import load_json

    with pytest.raises(ModelError) as raised:
        load_json(text, "the response")
    assert raised.value.code is ModelErrorCode.WIRE
    assert problem in str(raised.value)
