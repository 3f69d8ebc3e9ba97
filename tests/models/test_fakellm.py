"""The HTTP adapters against a mock server nobody here wrote: `fakellm` (PyPI).

The server runs on 127.0.0.1 on a free port, scripted by a YAML rule file: a
rule matches a phrase of the prompt and answers text, JSON text or tool calls.
Every case runs for both wire formats, streamed and not.

fakellm does not constrain decoding to a response schema (it ignores
`response_format` and forced tools), so the JSON case checks that a scripted
JSON answer arrives whole and decodes; streamed OpenAI answers carry no usage
chunk from fakellm, so token counts are only checked on the other paths.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models import Model, ModelReturn, build_model

from ._fakellm import running_fakellm
from ._helpers import ask, using

pytest.importorskip("fakellm", reason="fakellm (the `dev` extra) is not installed")

RULES = """\
version: 1
defaults:
  fallback: deterministic_echo
rules:
  - name: text
    when: {messages_contain: "say-text"}
    respond: {content: "Hello from fakellm, a server we did not write."}
  - name: json
    when: {messages_contain: "say-json"}
    respond: {content: '{"verdict": "feasible", "score": 0.8, "tags": ["a", "b"]}'}
  - name: tool
    # fakellm answers the provider-safe name the adapter declared on the wire
    when: {messages_contain: "use-tool", tools_include: context_read}
    respond:
      tool_calls:
        - {name: context_read, arguments: {key: strategies, limit: 3}}
"""


@pytest.fixture(scope="module")
def fakellm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`fakellm serve` on 127.0.0.1 (a free port), for the whole module."""
    with running_fakellm(tmp_path_factory.mktemp("fakellm"), RULES) as url:
        yield url


def fakellm_model(url: str, wire: str) -> Model:
    config: dict[str, Any] = {
        "adapter": wire,
        "base_url": f"{url}/v1" if wire == "openai" else url,
        "model": "gpt-4o-mini" if wire == "openai" else "claude-sonnet-4-5",
        "accounts": [{"name": "main", "api_key_env": "FAKELLM_KEY"}],
    }
    return build_model(
        "remote",
        config,
        base_dir=Path("."),
        env={"FAKELLM_KEY": "sk-fakellm-not-used-0123456789"},
        clock=FakeClock(),
        rng=random.Random(7),
    )


WIRES = ["openai", "anthropic"]
MODES = ["plain", "streamed"]


def call(url: str, wire: str, mode: str, text: str, *, tools: bool = False) -> ModelReturn:
    pieces: list[str] = []

    async def action(model: Model) -> ModelReturn:
        request = ask(text, tools=tools)
        if mode == "plain":
            return await model.call(request)
        result = await model.call_streaming(request, pieces.append)
        assert "".join(pieces) == result.text  # increments add up to the answer
        return result

    return using(fakellm_model(url, wire), action)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
def test_text(fakellm_url: str, wire: str, mode: str) -> None:
    result = call(fakellm_url, wire, mode, "Please say-text now.")
    assert result.text == "Hello from fakellm, a server we did not write."
    assert result.tool_calls == ()
    assert result.stop_reason == "end_turn"
    assert result.account == "main"
    if not (wire == "openai" and mode == "streamed"):
        assert result.usage.output_tokens > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
def test_json(fakellm_url: str, wire: str, mode: str) -> None:
    result = call(fakellm_url, wire, mode, "Answer as JSON: say-json.")
    assert json.loads(result.text) == {"verdict": "feasible", "score": 0.8, "tags": ["a", "b"]}
    assert result.stop_reason == "end_turn"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("wire", WIRES)
def test_tool_calls(fakellm_url: str, wire: str, mode: str) -> None:
    result = call(fakellm_url, wire, mode, "Please use-tool.", tools=True)
    (tool_call,) = result.tool_calls
    assert tool_call.name == "context.read"  # the wire name mapped back
    assert dict(tool_call.input) == {"key": "strategies", "limit": 3}
    assert tool_call.id
    assert result.stop_reason == "tool_use"


@pytest.mark.parametrize("wire", WIRES)
def test_speculating_hands_over_the_tool_call_once(fakellm_url: str, wire: str) -> None:
    early: list[Any] = []

    async def action(model: Model) -> ModelReturn:
        return await model.call_speculating(
            ask("Please use-tool.", tools=True), lambda _: None, early.append
        )

    result = using(fakellm_model(fakellm_url, wire), action)
    assert early == list(result.tool_calls)
    assert len(early) == 1
