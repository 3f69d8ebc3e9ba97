"""Replay stands in for the recorded model, and masking touches only the secrets in use."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from converge_dsl.clock import FakeClock
from converge_dsl.models import (
    AccountBinding,
    Message,
    Model,
    ModelError,
    ModelRequest,
    ModelReturn,
    RecordingModel,
    ReplayModel,
    ScriptedModel,
)
from converge_dsl.models._redact import MASK, Redactor, redact_text
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply

from ._helpers import KEYS, ask, http_model, using

SCRIPT = """\
apiVersion: converge-dsl/v1
kind: ModelScript
default: {reply: "Nothing to add."}
"""

LOOKALIKES = (
    "Bearer upstream-not-secret",
    "Authorization: Bearer upstream-not-secret",
    "x-api-key: not-a-key-either",
    "sk-looks-like-a-key-0123456789",
)


def scripted(file: str) -> ScriptedModel:
    return ScriptedModel.from_text(SCRIPT, file, clock=FakeClock())


def hello(model: str = "m") -> ModelRequest:
    return ModelRequest(model, (Message.text("user", "hello"),), suggestor="s")


@pytest.mark.parametrize("text", LOOKALIKES)
def test_masking_keeps_text_that_only_looks_like_a_credential(text: str) -> None:
    assert Redactor([KEYS["main"]])(text) == text
    assert redact_text(text) == text


def test_masking_replaces_the_exact_keys_in_any_header_form() -> None:
    redact = Redactor(KEYS.values())
    for key in KEYS.values():
        assert redact(f"Authorization: Bearer {key}") == f"Authorization: Bearer {MASK}"
        assert redact(f'{{"x-api-key": "{key}"}}') == f'{{"x-api-key": "{MASK}"}}'
    assert repr(redact) == "Redactor(2 secrets)"


def test_lookalike_answers_survive_record_and_replay(
    server: FakeProviderServer, tmp_path: Path
) -> None:
    cassette = tmp_path / "c.jsonl"
    answer = " | ".join(LOOKALIKES)
    server.reset(FakeReply(text=answer))
    server.queue(FakeReply(status=400, error_body=f"Authorization: Bearer {KEYS['main']}"))

    async def both(m: Model) -> ModelReturn:
        with pytest.raises(ModelError) as caught:
            await m.call(ask("first"))
        assert KEYS["main"] not in str(caught.value)
        return await m.call(ask("second"))

    recorded = using(RecordingModel(http_model(server, "openai"), cassette), both)
    text = cassette.read_text(encoding="utf-8")
    assert KEYS["main"] not in text
    assert json.dumps(answer)[1:-1] in text
    replay = ReplayModel.from_file(cassette)
    assert asyncio.run(replay.call(ask("second"))) == recorded
    assert recorded.text == answer


def test_replay_restores_model_id_and_account(server: FakeProviderServer, tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    model = http_model(server, "anthropic", accounts=("main", "backup"))
    recorded = using(RecordingModel(model, cassette), lambda m: m.call(ask()))
    line = json.loads(cassette.read_text(encoding="utf-8"))
    assert (line["model_id"], line["account"], line["v"]) == (model.model_id(), "main", 2)
    replay = ReplayModel.from_file(cassette)
    assert replay.model_id() == model.model_id()
    assert replay.provider_account() == AccountBinding(line["provider"], "main")
    replayed = asyncio.run(replay.call(ask()))
    assert (replayed.model_id, replayed.account) == (recorded.model_id, recorded.account)


def test_a_cassette_of_several_models_stands_in_for_each_by_name(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    for name in ("fast", "slow"):
        recorder = RecordingModel(scripted(f"{name}.yaml"), cassette, append=True, name=name)
        asyncio.run(recorder.call(hello(f"scripted:{name}.yaml")))
    assert ReplayModel.from_file(cassette).model_id() == "replay:c.jsonl"
    for name in ("fast", "slow"):
        replay = ReplayModel.from_file(cassette, name=name)
        assert replay.model_id() == f"scripted:{name}.yaml"
        assert asyncio.run(replay.call(hello(replay.model_id()))).text == "Nothing to add."


def test_a_return_without_model_id_gets_the_recorded_one(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    asyncio.run(RecordingModel(scripted("s.yaml"), cassette).call(hello()))
    entry = json.loads(cassette.read_text(encoding="utf-8"))
    entry["return"]["model_id"] = ""
    cassette.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    assert asyncio.run(ReplayModel.from_file(cassette).call(hello())).model_id == "scripted:s.yaml"


def test_a_version_1_cassette_still_replays(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    asyncio.run(RecordingModel(scripted("s.yaml"), cassette).call(hello()))
    entry = json.loads(cassette.read_text(encoding="utf-8"))
    for name in ("model_id", "account", "provider"):
        del entry[name]
    entry["v"] = 1
    cassette.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    replay = ReplayModel.from_file(cassette)
    assert replay.model_id() == "scripted:s.yaml"  # taken from the recorded return
    assert replay.provider_account() is None
    assert asyncio.run(replay.call(hello())).text == "Nothing to add."
