from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.errors import PipelineInvalid
from converge_dsl.models import (
    Message,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    ScriptedModel,
    ToolCallPart,
)
from converge_dsl.models._script import CODE_BAD_REGEX

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {suggestor: competitor-scan}
    reply: '[{"id": "acme", "name": "Acme"}]'
  - match: {contains: "Evaluate"}
    tool_calls: [{name: context.read, input: {key: strategies}}]
    times: 1
  - match: {turn: 3, regex: "retry.*later"}
    error: {code: E_RATE_LIMITED, message: slow down, retry_after: 2}
  - match: {contains: "wait"}
    delay_s: 1.5
    reply: waited
default: {reply: "Nothing to add."}
"""


def request(text: str, *, suggestor: str | None = None, turn: int | None = None) -> ModelRequest:
    return ModelRequest("default", (Message.text("user", text),), suggestor=suggestor, turn=turn)


def model(clock: FakeClock | None = None) -> ScriptedModel:
    return ScriptedModel.from_text(SCRIPT, "market.script.yaml", clock=clock or FakeClock())


def test_first_matching_rule_wins_and_model_id_names_the_file() -> None:
    result = asyncio.run(model().call(request("Evaluate", suggestor="competitor-scan")))
    assert result.text == '[{"id": "acme", "name": "Acme"}]'
    assert result.stop_reason == "end_turn"
    assert result.model_id == "scripted:market.script.yaml"
    assert model().model_id() == "scripted:market.script.yaml"


def test_times_falls_through_to_later_rules() -> None:
    scripted = model()

    async def twice() -> tuple[ModelReturn, ModelReturn]:
        return await scripted.call(request("Evaluate all")), await scripted.call(
            request("Evaluate all")
        )

    first, second = asyncio.run(twice())
    assert first.stop_reason == "tool_use"
    assert [(c.name, dict(c.input)) for c in first.tool_calls] == [
        ("context.read", {"key": "strategies"})
    ]
    assert second.text == "Nothing to add."


def test_scripted_error_is_a_model_error_with_its_code() -> None:
    with pytest.raises(ModelError) as caught:
        asyncio.run(model().call(request("please retry it later", turn=3)))
    assert caught.value.code is ModelErrorCode.RATE_LIMITED
    assert caught.value.retryable
    assert caught.value.retry_after == 2
    # the same text at another turn does not match the rule
    assert asyncio.run(model().call(request("retry later", turn=2))).text == "Nothing to add."


def test_delay_awaits_the_injected_clock() -> None:
    clock = FakeClock()
    result = asyncio.run(model(clock).call(request("please wait")))
    assert result.text == "waited"
    assert clock.sleeps == [1.5]


def test_streaming_increments_concatenate_to_the_reply() -> None:
    pieces: list[str] = []
    req = request("x", suggestor="competitor-scan")
    result = asyncio.run(model().call_streaming(req, pieces.append))
    assert len(pieces) > 1
    assert "".join(pieces) == result.text
    assert result == asyncio.run(model().call(req))


def test_speculating_hands_over_every_tool_call_of_the_return() -> None:
    early: list[ToolCallPart] = []
    result = asyncio.run(
        model().call_speculating(request("Evaluate"), lambda _: None, early.append)
    )
    assert tuple(early) == result.tool_calls


def test_usage_is_estimated_at_four_characters_a_token() -> None:
    result = asyncio.run(model().call(request("x" * 9, suggestor="competitor-scan")))
    assert result.usage.input_tokens == 3  # ceil(9 / 4)
    assert result.usage.output_tokens == 8  # ceil(32 / 4)


def test_same_run_twice_gives_identical_returns() -> None:
    requests = [
        request("Evaluate", turn=0),
        request("Evaluate", turn=1),
        request("x", suggestor="competitor-scan"),
        request("please wait"),
    ]

    async def run() -> list[ModelReturn]:
        scripted = model()
        return [await scripted.call(r) for r in requests]

    assert asyncio.run(run()) == asyncio.run(run())


def test_no_rule_and_no_default_is_e_script() -> None:
    text = (
        "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules:\n  - {match: {turn: 1}, reply: a}\n"
    )
    with pytest.raises(ModelError) as caught:
        asyncio.run(ScriptedModel.from_text(text, "s.yaml").call(request("hi")))
    assert caught.value.code is ModelErrorCode.SCRIPT
    assert "rules[0] (s.yaml:4:5)" in str(caught.value)


def test_bad_script_raises_located_diagnostics(tmp_path: Path) -> None:
    path = tmp_path / "bad.script.yaml"
    path.write_text(
        "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules:\n"
        "  - match: {suggestr: x}\n    reply: hi\n"
    )
    with pytest.raises(PipelineInvalid) as caught:
        ScriptedModel.from_file(path)
    first = caught.value.diagnostics[0]
    assert (first.line, first.column) == (4, 13)
    assert first.hint is not None
    assert "suggestor" in first.hint


def test_invalid_regex_points_at_the_regex() -> None:
    text = (
        "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules:\n"
        "  - match: {regex: 'a(b'}\n    reply: x\n"
    )
    with pytest.raises(PipelineInvalid) as caught:
        ScriptedModel.from_text(text, "s.yaml")
    first = caught.value.diagnostics[0]
    assert first.code == CODE_BAD_REGEX == "CD701"
    assert first.line == 4
    assert first.path == ("rules", 0, "match", "regex")


def test_error_and_reply_together_are_rejected() -> None:
    text = (
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        "default: {reply: x, error: {code: E_WIRE}}\n"
    )
    with pytest.raises(PipelineInvalid):
        ScriptedModel.from_text(text, "s.yaml")


def test_scripted_timeout_carries_a_recovery_hint_and_the_rule() -> None:
    text = (
        "apiVersion: converge-dsl/v1\nkind: ModelScript\n"
        "default: {error: {code: E_TIMEOUT, message: slow}}\n"
    )
    scripted = ScriptedModel.from_text(text, "s.yaml")
    with pytest.raises(ModelError) as caught:
        asyncio.run(scripted.call(request("hi")))
    assert caught.value.retryable
    assert caught.value.hint == (
        "with a provider, raise timeout_s or check the server's load; "
        "this failure is scripted by default: edit the model script to change it"
    )


def test_a_script_is_parsed_once_while_its_bytes_stay_the_same(tmp_path: Path) -> None:
    from converge_dsl.models._script_checks import load_script

    path = tmp_path / "s.script.yaml"
    path.write_text(SCRIPT)
    first = load_script(path, display="s.script.yaml")
    assert load_script(path, display="s.script.yaml") is first


def test_a_script_changed_between_two_loads_is_read_again(tmp_path: Path) -> None:
    from converge_dsl.models._script_checks import load_script

    path = tmp_path / "s.script.yaml"
    path.write_text(SCRIPT)
    load_script(path, display="s.script.yaml")
    # Same size and, within the file system's clock tick, the same times: only the bytes differ.
    path.write_text(SCRIPT.replace("Nothing to add.", "Nothing to say.", 1))
    script = load_script(path, display="s.script.yaml")
    assert script.default is not None
    assert script.default.reply == "Nothing to say."
    path.write_text("rules: [")
    with pytest.raises(PipelineInvalid):
        load_script(path, display="s.script.yaml")


def test_a_settled_script_is_not_read_again_until_its_signature_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time
    from types import SimpleNamespace

    from converge_dsl.models import _script_checks

    path = tmp_path / "s.script.yaml"
    path.write_text(SCRIPT)
    os.utime(path, ns=(10**18, 10**18))  # modified long before it is read: settled
    # and read long after its change time (which no test can set back): settled
    later = SimpleNamespace(time_ns=lambda: time.time_ns() + 10**10)
    monkeypatch.setattr(_script_checks, "time", later)
    reads: list[Path] = []
    read = _script_checks._bytes

    def counted(where: Path) -> bytes | None:
        reads.append(where)
        return read(where)

    monkeypatch.setattr(_script_checks, "_bytes", counted)
    first = _script_checks.load_script(path, display="s.script.yaml")
    assert _script_checks.load_script(path, display="s.script.yaml") is first
    assert len(reads) == 1
    path.write_text(SCRIPT.replace("Nothing to add.", "Nothing more.", 1))
    os.utime(path, ns=(10**18 + 1, 10**18 + 1))
    script = _script_checks.load_script(path, display="s.script.yaml")
    assert script.default is not None
    assert script.default.reply == "Nothing more."
    assert len(reads) == 2


def test_a_reply_is_checked_against_the_schema_it_is_given_now() -> None:
    from converge_dsl.models.scripted import schema_problem

    schema: dict[str, object] = {"type": "array", "items": {"type": "object"}}
    assert schema_problem("[{}]", schema) is None
    schema["items"] = {"type": "string"}  # the same object, another schema
    problem = schema_problem("[{}]", schema)
    assert problem is not None
    assert "/0" in problem


def test_another_reply_against_a_schema_met_before_makes_no_new_validator(
    first_arguments: Callable[[ModuleType, str], list[object]],
) -> None:
    from converge_dsl.models import scripted

    built = first_arguments(scripted, "python_validator")
    schema: dict[str, Any] = {"type": "array", "items": {"type": "integer"}, "maxItems": 7}
    assert scripted.schema_problem("[1]", schema) is None
    assert scripted.schema_problem("[1, 2]", schema) is None
    assert scripted.schema_problem('["3"]', schema) is not None
    assert len(built) == 1
    schema["maxItems"] = 1  # the same object, another schema: a validator of its own
    assert scripted.schema_problem("[1, 2]", schema) is not None
    assert len(built) == 2
