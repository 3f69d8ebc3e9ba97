"""The Anthropic request body: in-conversation system messages and role alternation.

The exact body is read back from the real loopback server.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from converge_dsl.models import Message, ModelRequest, TextPart, ToolCallPart, ToolResultPart
from converge_dsl.models._anthropic import SYSTEM_PREFIX, AnthropicWire
from converge_dsl.models._wire import ToolNames, WireSettings
from converge_dsl.models.fakeserver import FakeProviderServer
from converge_dsl.models.port import Role

from ._helpers import conversation, http_model, using


def test_system_messages_keep_their_place_and_roles_alternate(
    server: FakeProviderServer,
) -> None:
    using(http_model(server, "anthropic"), lambda m: m.call(conversation()))
    assert server.requests[0].body == {
        "model": "fake-model",
        "max_tokens": 4096,
        "system": "Be brief.\n\nYou are the scanner.",
        "tools": [
            {
                "name": "context_read",
                "description": "Read facts",
                "input_schema": {"type": "object"},
            }
        ],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Find competitors."},
                    {"type": "text", "text": "[system] Plan: scan, then propose."},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {
                        "type": "tool_use",
                        "id": "c1",
                        "name": "context_read",
                        "input": {"key": "strategies"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [  # the tool_result first, though the reminder came before it
                    {
                        "type": "tool_result",
                        "tool_use_id": "c1",
                        "content": "[]",
                        "is_error": False,
                    },
                    {"type": "text", "text": "[system] Turn 1 of 5."},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c2", "name": "context_read", "input": {"key": "x"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c2",
                        "content": "boom",
                        "is_error": True,
                    },
                    {"type": "text", "text": "[system] Reminder: propose facts."},
                ],
            },
        ],
    }


def test_only_system_messages_all_go_to_the_top_level(server: FakeProviderServer) -> None:
    req = ModelRequest(
        "fast",
        (Message.text("system", "Rule one."), Message.text("system", "Rule two.")),
    )
    using(http_model(server, "anthropic"), lambda m: m.call(req))
    body = server.requests[0].body
    assert body["system"] == "Rule one.\n\nRule two."
    assert body["messages"] == []


ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
roles = st.sampled_from(ROLES)
words = st.text("ab ", max_size=4)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    role = draw(roles)
    parts: list[TextPart | ToolCallPart | ToolResultPart] = []
    for index in range(draw(st.integers(0, 3))):
        if role == "assistant" and draw(st.booleans()):
            parts.append(ToolCallPart(f"c{index}", "t", {}))
        elif role in ("tool", "user") and draw(st.booleans()):
            parts.append(ToolResultPart(f"c{index}", draw(words)))
        else:
            parts.append(TextPart(draw(words)))
    return Message(role, tuple(parts))


@given(st.lists(messages(), max_size=8))
def test_any_conversation_gives_a_valid_anthropic_body(history: list[Message]) -> None:
    req = ModelRequest("m", tuple(history))
    body: dict[str, Any] = AnthropicWire().body(req, WireSettings("m"), ToolNames(()), False)
    sent = body["messages"]
    assert all(a["role"] != b["role"] for a, b in pairwise(sent))
    for message in sent:
        kinds = [block["type"] for block in message["content"]]
        assert kinds  # no empty message
        if message["role"] == "user":
            assert kinds == sorted(kinds, key=lambda k: k != "tool_result")
        assert all(b["text"] for b in message["content"] if b["type"] == "text")
    # nothing is lost: leading system text goes to the top level, every other
    # non-empty text and every tool block is sent once, in order
    top: list[str] = []
    texts: list[str] = []
    started = False
    for message in history:
        parts = [p for p in message.parts if not isinstance(p, TextPart) or p.text]
        if message.role == "system" and not started:
            top.extend(p.text for p in parts if isinstance(p, TextPart))
            continue
        started = started or bool(parts)
        prefix = SYSTEM_PREFIX if message.role == "system" else ""
        texts.extend(prefix + p.text for p in parts if isinstance(p, TextPart))
    system = body.get("system")
    assert (system.split("\n\n") if system else []) == top
    assert [b["text"] for m in sent for b in m["content"] if b["type"] == "text"] == texts
    tool_blocks = [b for m in sent for b in m["content"] if b["type"] != "text"]
    assert len(tool_blocks) == sum(not isinstance(p, TextPart) for m in history for p in m.parts)
