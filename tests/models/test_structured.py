"""Structured outputs through the model port: a request's `response_schema` on the wire.

The request bodies are read back from the real loopback server and compared with
`expected/structured-*.json`; regenerate them (`UPDATE_EXPECTED=1`) only after
reading the diff.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from converge_dsl.errors import PipelineInvalid
from converge_dsl.models import (
    Message,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ScriptedModel,
    ToolSpec,
)
from converge_dsl.models._common import normalise_request, request_key
from converge_dsl.models._openai import strict_shaped
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from ._helpers import ask, http_model, using

EXPECTED = Path(__file__).parent / "expected"
SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],
        "properties": {"name": {"type": "string"}},
    },
}
ANSWER = {"items": [{"name": "Lipton"}]}
CLOSED_ITEM = {**SCHEMA["items"], "additionalProperties": False}
CLOSED: dict[str, Any] = {
    "type": "object",
    "properties": {"items": {**SCHEMA, "items": CLOSED_ITEM}},
    "required": ["items"],
    "additionalProperties": False,
}


def shaped(text: str = "List competitors", schema: Any = SCHEMA) -> ModelRequest:
    return ModelRequest(
        "fast",
        (Message.text("user", text),),
        system=("Answer in JSON.",),
        suggestor="scan",
        response_schema=schema,
    )


def check_expected(name: str, body: Any) -> None:
    path = EXPECTED / f"structured-{name}.json"
    text = json.dumps(body, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_EXPECTED") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"request body differs from {path.name}"


@pytest.mark.parametrize("setting", ["json_schema", "json_object", "none"])
def test_openai_body_for_each_structured_output_setting(
    server: FakeProviderServer, setting: str
) -> None:
    server.reset(FakeReply(text=json.dumps([{"name": "Lipton"}])))
    model = http_model(server, "openai", structured_output=setting)
    result = using(model, lambda m: m.call(shaped()))
    assert json.loads(result.text) == [{"name": "Lipton"}]
    check_expected(f"openai-{setting}", server.requests[0].body)


def test_openai_streamed_body_carries_the_schema_too(server: FakeProviderServer) -> None:
    server.reset(FakeReply(text="[]"))
    using(http_model(server, "openai", stream=True), lambda m: m.call(shaped()))
    body = server.requests[0].body
    assert body["stream"] is True
    assert body["response_format"]["json_schema"]["schema"] == wrapped(SCHEMA)


def wrapped(schema: Any) -> dict[str, Any]:
    """An array-root schema as OpenAI's json_schema mode gets it: the one property `answer`."""
    return {
        "type": "object",
        "properties": {"answer": schema},
        "required": ["answer"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("stream", [False, True])
def test_openai_array_schemas_are_wrapped_so_strict_is_possible(
    server: FakeProviderServer, stream: bool
) -> None:
    closed_array = {**SCHEMA, "items": CLOSED_ITEM}
    server.reset(FakeReply(text=json.dumps({"answer": [{"name": "Lipton"}]})))
    answer = using(
        http_model(server, "openai", stream=stream), lambda m: m.call(shaped(schema=closed_array))
    )
    response_format = server.requests[0].body["response_format"]["json_schema"]
    assert response_format["schema"] == wrapped(closed_array)
    assert response_format["strict"] is True
    assert json.loads(answer.text) == [{"name": "Lipton"}]  # unwrapped again


def test_openai_an_answer_that_ignores_the_wrapper_is_kept(server: FakeProviderServer) -> None:
    server.reset(FakeReply(text='[{"name": "Lipton"}]'))
    answer = using(http_model(server, "openai"), lambda m: m.call(shaped()))
    assert json.loads(answer.text) == [{"name": "Lipton"}]


def test_anthropic_structured_output_none_asks_for_nothing(server: FakeProviderServer) -> None:
    server.reset(FakeReply(text='[{"name": "Lipton"}]'))
    model = http_model(server, "anthropic", structured_output="none")
    answer = using(model, lambda m: m.call(shaped()))
    body = server.requests[0].body
    assert "tool_choice" not in body
    assert "tools" not in body
    assert json.loads(answer.text) == [{"name": "Lipton"}]


def test_openai_strict_only_for_schemas_strict_mode_accepts(server: FakeProviderServer) -> None:
    using(http_model(server, "openai"), lambda m: m.call(shaped(schema=CLOSED)))
    assert server.requests[0].body["response_format"]["json_schema"]["strict"] is True
    assert strict_shaped(CLOSED)
    assert not strict_shaped(SCHEMA)  # the root is not an object
    assert not strict_shaped({**CLOSED, "required": []})
    assert not strict_shaped({**CLOSED, "properties": {"items": SCHEMA}})  # open items
    open_items = {**CLOSED, "properties": {"items": {"type": "object", "properties": {}}}}
    assert not strict_shaped(open_items)


def test_requests_without_a_schema_send_no_response_format(server: FakeProviderServer) -> None:
    using(http_model(server, "openai"), lambda m: m.call(ask()))
    using(http_model(server, "anthropic"), lambda m: m.call(ask()))
    assert "response_format" not in server.requests[0].body
    assert "tool_choice" not in server.requests[1].body
    assert "tools" not in server.requests[1].body


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_forced_answer_tool_gives_the_answer_text(
    server: FakeProviderServer, stream: bool
) -> None:
    server.reset(FakeReply(text="", tool_calls=(("answer", ANSWER),)))
    increments: list[str] = []
    request = shaped(schema=CLOSED)
    result = using(
        http_model(server, "anthropic"),
        lambda m: m.call_streaming(request, increments.append) if stream else m.call(request),
    )
    assert result.text == '{"items":[{"name":"Lipton"}]}'  # canonical JSON
    assert result.tool_calls == ()
    assert result.stop_reason == "end_turn"
    if stream:
        assert "".join(increments) == result.text
    body = server.requests[0].body
    assert body.get("stream", False) is stream
    body.pop("stream", None)
    check_expected("anthropic", body)


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_wraps_a_schema_that_is_not_an_object(
    server: FakeProviderServer, stream: bool
) -> None:
    server.reset(FakeReply(text="", tool_calls=(("answer", {"answer": [{"name": "Lipton"}]}),)))
    request = shaped(schema=SCHEMA)
    result = using(
        http_model(server, "anthropic"),
        lambda m: m.call_streaming(request, _ignore) if stream else m.call(request),
    )
    assert result.text == '[{"name":"Lipton"}]'
    (tool,) = server.requests[0].body["tools"]
    assert tool["input_schema"] == {
        "type": "object",
        "properties": {"answer": SCHEMA},
        "required": ["answer"],
    }


def test_anthropic_wrapping_keeps_local_refs_resolvable(server: FakeProviderServer) -> None:
    defs = {"$defs": {"item": SCHEMA["items"]}}
    schema = {"type": "array", "items": {"$ref": "#/$defs/item"}, **defs}
    using(http_model(server, "anthropic"), lambda m: m.call(shaped(schema=schema)))
    (tool,) = server.requests[0].body["tools"]
    assert tool["input_schema"] == {
        "type": "object",
        "properties": {"answer": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
        "required": ["answer"],
        **defs,
    }


def test_anthropic_wrapped_answer_without_its_field_is_a_wire_error(
    server: FakeProviderServer,
) -> None:
    server.reset(FakeReply(text="", tool_calls=(("answer", {"items": []}),)))
    with pytest.raises(ModelError) as info:
        using(http_model(server, "anthropic", retries=0), lambda m: m.call(shaped()))
    assert info.value.code is ModelErrorCode.WIRE
    assert "the answer tool's input has no `answer`" in str(info.value)


def _ignore(_: str) -> None:
    return None


def test_anthropic_answer_tool_keeps_clear_of_a_request_tool_named_answer(
    server: FakeProviderServer,
) -> None:
    server.reset(FakeReply(text="", tool_calls=(("answer_2", ANSWER), ("answer", {"q": 1}))))
    request = ModelRequest(
        "fast",
        (Message.text("user", "go"),),
        tools=(ToolSpec("answer", "a user tool", {"type": "object"}),),
        response_schema=CLOSED,
    )
    result = using(http_model(server, "anthropic"), lambda m: m.call(request))
    body = server.requests[0].body
    assert [t["name"] for t in body["tools"]] == ["answer", "answer_2"]
    assert body["tool_choice"] == {"type": "tool", "name": "answer_2"}
    assert result.text == '{"items":[{"name":"Lipton"}]}'
    assert [(c.name, dict(c.input)) for c in result.tool_calls] == [("answer", {"q": 1})]
    assert result.stop_reason == "tool_use"


SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {contains: good}
    reply: '[{"name": "Lipton"}]'
  - match: {contains: bad}
    reply: '[{"name": "Lipton"}, {"title": "Twinings"}]'
default: {reply: "sorry, no idea"}
"""


def scripted_call(request: ModelRequest) -> str:
    model = ScriptedModel.from_text(SCRIPT, "s.yaml")
    return asyncio.run(model.call(request)).text


def test_scripted_reply_that_fits_the_schema_is_answered() -> None:
    assert json.loads(scripted_call(shaped("good"))) == [{"name": "Lipton"}]
    assert scripted_call(shaped("bad", schema=None)).startswith("[")  # no schema, no check


def test_scripted_reply_off_the_schema_names_the_rule_and_the_pointer() -> None:
    with pytest.raises(ModelError) as info:
        scripted_call(shaped("bad"))
    assert info.value.code is ModelErrorCode.SCRIPT
    assert not info.value.retryable
    assert str(info.value).startswith(
        "[E_SCRIPT] model script s.yaml: rules[1] (s.yaml:6:5) gives a reply that does not fit"
        " the request's response schema: at JSON pointer /1: 'name' is a required property"
    )


def test_scripted_default_reply_that_is_not_json_is_named() -> None:
    with pytest.raises(ModelError) as info:
        scripted_call(shaped("anything"))
    assert "model script s.yaml: the default reply gives a reply" in str(info.value)
    assert "the reply is not JSON" in str(info.value)


OFF_SCHEMA = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {contains: bad}
    reply: '[{"title": "Twinings"}]'
    off_schema: true
  - match: {contains: prose}
    reply: "sorry, no idea"
    off_schema: true
  - match: {contains: checked}
    reply: "sorry, no idea"
    off_schema: false
"""


def test_an_off_schema_reply_is_given_as_written_on_purpose() -> None:
    model = ScriptedModel.from_text(OFF_SCHEMA, "s.yaml")
    answer = asyncio.run(model.call(shaped("bad")))
    assert answer.text == '[{"title": "Twinings"}]'
    assert asyncio.run(model.call(shaped("prose"))).text == "sorry, no idea"
    with pytest.raises(ModelError) as info:
        asyncio.run(model.call(shaped("checked")))  # `false` is the default: checked
    assert "the reply is not JSON" in str(info.value)
    assert "mark it `off_schema: true`" in (info.value.hint or "")


@pytest.mark.parametrize(
    ("outcome", "where", "says"),
    [
        ("{tool_calls: [{name: finish}], off_schema: true}", ("default",), "'reply'"),
        ("{reply: x, off_schema: 'yes'}", ("default", "off_schema"), "boolean"),
    ],
)
def test_off_schema_needs_a_reply_and_is_a_boolean(
    outcome: str, where: tuple[str, ...], says: str
) -> None:
    text = f"apiVersion: converge-dsl/v1\nkind: ModelScript\ndefault: {outcome}\n"
    with pytest.raises(PipelineInvalid) as info:
        ScriptedModel.from_text(text, "s.yaml")
    first = info.value.diagnostics[0]
    assert (first.file, first.line, first.path) == ("s.yaml", 3, where)
    assert says in first.message


def test_scripted_check_of_a_schema_with_a_dangling_reference_says_so() -> None:
    schema = {"type": "array", "items": {"$ref": "#/$defs/missing"}}
    with pytest.raises(ModelError) as info:
        scripted_call(shaped("good", schema=schema))
    assert "at /items/$ref: $ref '#/$defs/missing' points to nothing in the schema" in str(
        info.value
    )


def test_replay_keys_of_requests_without_a_schema_are_unchanged() -> None:
    request = ask()
    assert "response_schema" not in normalise_request(request)
    # The key every cassette recorded before requests could carry a schema.
    assert request_key(request) == (
        "114d5259c28c9e020454c65cc2ffc53a87336d9ce7b711b4084fdf5ca50229e6"
    )
    with_schema = shaped(schema=SCHEMA)
    assert normalise_request(with_schema)["response_schema"] == SCHEMA
    assert request_key(with_schema) != request_key(shaped(schema=CLOSED))
