"""Record / replay: a recorded run replays identically offline; misses are explained."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models import (
    Message,
    Model,
    ModelDefaults,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
    RecordingModel,
    ReplayModel,
    ScriptedModel,
)
from converge_dsl.models.cassette import first_difference
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from ._helpers import KEYS, ask, http_model, using

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
rules:
  - match: {contains: "Evaluate"}
    tool_calls: [{name: context.read, input: {key: strategies}}]
    times: 1
  - match: {contains: boom}
    error: {code: E_PROVIDER, message: exploded}
default: {reply: "Nothing to add."}
"""


def turn(text: str, number: int) -> ModelRequest:
    return ModelRequest("default", (Message.text("user", text),), suggestor="rev", turn=number)


REQUESTS = [turn("Evaluate", 0), turn("Evaluate", 0), turn("Next", 1)]


def _entry(**usage: object) -> bytes:
    """One cassette line whose answer reports `usage`."""
    answer = {
        "message": {"role": "assistant", "parts": [{"type": "text", "text": "hi"}]},
        "usage": {"input_tokens": 1, "output_tokens": 1, **usage},
    }
    return json.dumps({"key": "k", "request": {}, "return": answer}).encode() + b"\n"


async def drive(model: Model) -> list[ModelReturn | str]:
    out: list[ModelReturn | str] = []
    for req in [*REQUESTS, turn("boom", 2)]:
        try:
            out.append(await model.call(req))
        except ModelError as exc:
            out.append(str(exc))
    return out


def test_recorded_run_replays_identically(tmp_path: Path) -> None:
    cassette = tmp_path / "run.cassette.jsonl"
    scripted = ScriptedModel.from_text(SCRIPT, "s.yaml", clock=FakeClock())
    recorded = asyncio.run(drive(RecordingModel(scripted, cassette)))
    replayed = asyncio.run(drive(ReplayModel.from_file(cassette)))
    assert replayed == recorded
    # the same key recorded twice replays its answers in order
    assert isinstance(recorded[0], ModelReturn)
    assert isinstance(recorded[1], ModelReturn)
    assert recorded[0].tool_calls
    assert not recorded[1].tool_calls
    assert "[E_PROVIDER] exploded" in str(recorded[3])


def test_streaming_replay_splits_the_text(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    scripted = ScriptedModel.from_text(SCRIPT, "s.yaml")
    asyncio.run(RecordingModel(scripted, cassette).call(turn("Next", 1)))
    pieces: list[str] = []
    result = asyncio.run(
        ReplayModel.from_file(cassette).call_streaming(turn("Next", 1), pieces.append)
    )
    assert "".join(pieces) == result.text == "Nothing to add."


def test_miss_names_the_nearest_recorded_request(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    scripted = ScriptedModel.from_text(SCRIPT, "s.yaml")
    asyncio.run(drive(RecordingModel(scripted, cassette)))
    replay = ReplayModel.from_file(cassette)
    with pytest.raises(ModelError) as caught:
        asyncio.run(replay.call(turn("Nxt", 1)))
    error = caught.value
    assert error.code is ModelErrorCode.REPLAY_MISS
    assert "nearest recorded request: line 3 (suggestor 'rev', turn 1)" in str(error)
    assert "messages[0].parts[0].text" in str(error)


def test_http_recording_holds_no_secret(server: FakeProviderServer, tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    server.reset(FakeReply(text=f"my key is {KEYS['main']}"))
    server.queue(
        FakeReply(
            status=400,
            error_body=json.dumps({"error": {"message": f"Authorization: Bearer {KEYS['main']}"}}),
        )
    )
    model = RecordingModel(http_model(server, "openai"), cassette)

    async def both(m: Model) -> None:
        with pytest.raises(ModelError):
            await m.call(ask("first"))
        await m.call(ask("second"))

    using(model, both)
    text = cassette.read_text()
    assert len(text.splitlines()) == 2
    assert KEYS["main"] not in text
    assert '"account": "main"' in text


def test_unreadable_cassette_is_e_config(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(ModelError) as caught:
        ReplayModel.from_file(bad)
    assert caught.value.code is ModelErrorCode.CONFIG
    assert "line 1" in str(caught.value)
    with pytest.raises(ModelError):
        ReplayModel.from_file(tmp_path / "missing.jsonl")


def test_first_difference() -> None:
    assert first_difference({"a": [1, 2]}, {"a": [1, 3]}) == "a[1]"
    assert first_difference({"a": [1]}, {"a": [1, 2]}) == "a (length 1 recorded, 2 now)"
    assert first_difference({"a": 1}, {"a": 1}) is None


def test_request_key_ignores_nothing_that_matters() -> None:
    from converge_dsl.models._common import request_key

    base = turn("x", 1)
    assert request_key(base) == request_key(turn("x", 1))
    assert request_key(base) != request_key(dataclasses.replace(base, temperature=0.5))
    assert request_key(base) != request_key(dataclasses.replace(base, turn=2))


def test_replay_answers_for_the_model_that_was_recorded(tmp_path: Path) -> None:
    """Requests name the answering model's id; the replay stands in for it."""
    cassette = tmp_path / "run.jsonl"
    scripted = ScriptedModel.from_text(SCRIPT, "s.yaml", clock=FakeClock())
    asked = ModelRequest("scripted:s.yaml", (Message.text("user", "hello"),), suggestor="r")
    recorded = asyncio.run(RecordingModel(scripted, cassette).call(asked))
    replay = ReplayModel.from_file(cassette)
    as_replay = dataclasses.replace(asked, model=replay.model_id())
    assert asyncio.run(replay.call(as_replay)).text == recorded.text


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (bytes(range(128, 256)), "is not UTF-8 text (byte 0)"),
        (b"[" * 100_000 + b"\n", "line 1 nests deeper than 256 levels"),
        (b"[" * 900 + b"]" * 900 + b"\n", "line 1 nests deeper than 256 levels"),
        (b'"text"\n', "line 1 is not a recording: not a JSON object"),
        (b'{"key": \n', "line 1 is not a recording: not JSON (Expecting value at column 9)"),
        (b'{"request": {}}\n', "line 1 is not a recording: it has no 'key' field"),
        (
            b'{"key": ' + b"1" * 5000 + b"}\n",
            "line 1 is not a recording: a number in it has too many digits to be read",
        ),
        (b'{"key": "k", "request": {}, "return": 3}\n', "a field holds a value of the wrong type"),
        (
            b'{"seq": 0, "type": "run_started"}\n',
            "line 1 is not a recording: it is a trace line (`--trace` writes those)",
        ),
        (_entry(input_tokens=-(10**9)), "line 1 is not a recording: usage count input_tokens is"),
        (_entry(output_tokens=None), "usage count output_tokens is not an integer"),
        (_entry(input_tokens=True), "usage count input_tokens is not an integer"),
        (_entry(input_tokens=2.5), "usage count input_tokens is not an integer"),
    ],
)
def test_unreadable_cassette_is_e_config_saying_to_record_again(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    with pytest.raises(ModelError) as caught:
        ReplayModel.from_file(path)
    assert caught.value.code is ModelErrorCode.CONFIG
    assert problem in caught.value.message
    assert caught.value.hint is not None
    assert "--record CASSETTE" in caught.value.hint


def test_recording_write_failure_is_a_model_error_naming_the_cassette(tmp_path: Path) -> None:
    folder = tmp_path / "taken"
    folder.mkdir()
    scripted = ScriptedModel.from_text(SCRIPT, "s.yaml", clock=FakeClock())
    recording = RecordingModel(scripted, folder, append=True)
    with pytest.raises(ModelError) as caught:
        asyncio.run(recording.call(ModelRequest("m", (Message.text("user", "hi"),))))
    assert caught.value.code is ModelErrorCode.CONFIG
    assert f"cannot write cassette '{folder}'" in caught.value.message


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_an_answer_holding_a_unicode_line_break_replays_whole(
    tmp_path: Path, separator: str
) -> None:
    cassette = tmp_path / "c.jsonl"
    script = SCRIPT.replace('"Nothing to add."', f'"one\\u{ord(separator):04x}two"')
    scripted = ScriptedModel.from_text(script, "s.yaml", clock=FakeClock())
    recorded = asyncio.run(RecordingModel(scripted, cassette).call(turn("Next", 1)))
    line = cassette.read_text(encoding="utf-8").rstrip("\n").rsplit("\n", 1)[-1]
    if separator not in line:  # the recorder escapes it: write it raw, as valid JSON may
        line = line.replace(json.dumps(separator)[1:-1], separator)
        cassette.write_text(cassette.read_text().rsplit("\n", 2)[0] + "\n" + line + "\n")
    replayed = asyncio.run(ReplayModel.from_file(cassette).call(turn("Next", 1)))
    assert replayed.text == recorded.text == f"one{separator}two"


class _Gated(ModelDefaults):
    """Answers `a0` at once; `b0` only once `a1` was asked (both in flight first)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    def model_id(self) -> str:
        return "gated"

    async def call(self, req: ModelRequest) -> ModelReturn:
        if req.suggestor == "b":
            await self.asked.wait()
        elif req.turn == 1:
            self.asked.set()
        else:
            await asyncio.sleep(0)  # b's call starts while a's first is in flight
        return ModelReturn(message=Message.text("assistant", f"{req.suggestor}{req.turn}"))


def _logged(model: Model, log: list[str]) -> Model:
    class Logged(ModelDefaults):
        def model_id(self) -> str:
            return model.model_id()

        async def call(self, req: ModelRequest) -> ModelReturn:
            log.append(f"{req.suggestor}{req.turn}")
            return await model.call(req)

    return Logged()


async def _two_callers(model: Model) -> None:
    def ask_as(name: str, number: int) -> ModelRequest:
        return ModelRequest("m", (Message.text("user", "go"),), suggestor=name, turn=number)

    async def first() -> None:
        await model.call(ask_as("a", 0))
        await model.call(ask_as("a", 1))

    await asyncio.gather(first(), model.call(ask_as("b", 0)))


def test_a_replay_starts_concurrent_calls_in_the_recorded_order(tmp_path: Path) -> None:
    """A call that started before another caller's next one starts first in the replay
    too, though a replay answers at once (what it reserves meets the budget in order)."""
    cassette = tmp_path / "c.jsonl"
    recorded: list[str] = []
    asyncio.run(_two_callers(_logged(RecordingModel(_Gated(), cassette), recorded)))
    assert recorded == ["a0", "b0", "a1"]
    replayed: list[str] = []
    asyncio.run(_two_callers(_logged(ReplayModel.from_file(cassette), replayed)))
    assert replayed == recorded
