"""The OpenAI request body: system messages stay in place; tool answers follow their call.

The exact body is read back from the real loopback server.
"""

from __future__ import annotations

import json

from converge_dsl.models.fakeserver import FakeProviderServer

from ._helpers import conversation, http_model, using


def call(call_id: str, key: str) -> dict[str, object]:
    arguments = json.dumps({"key": key})
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "context_read", "arguments": arguments},
    }


def test_system_messages_stay_in_place_and_tool_answers_follow_their_call(
    server: FakeProviderServer,
) -> None:
    using(http_model(server, "openai"), lambda m: m.call(conversation()))
    assert server.requests[0].body == {
        "model": "fake-model",
        "stream": False,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "context_read",
                    "description": "Read facts",
                    "parameters": {"type": "object"},
                },
            }
        ],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "system", "content": "You are the scanner."},
            {"role": "user", "content": "Find competitors."},
            {"role": "system", "content": "Plan: scan, then propose."},
            {"role": "assistant", "content": "Looking.", "tool_calls": [call("c1", "strategies")]},
            {"role": "tool", "tool_call_id": "c1", "content": "[]"},  # moved up past ...
            {"role": "system", "content": "Turn 1 of 5."},  # ... this one
            {"role": "assistant", "content": None, "tool_calls": [call("c2", "x")]},
            {"role": "tool", "tool_call_id": "c2", "content": "ERROR: boom"},
            {"role": "system", "content": "Reminder: propose facts."},
        ],
    }
