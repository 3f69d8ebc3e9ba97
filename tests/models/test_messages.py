"""User-facing error messages, compared against tests/models/expected/errors.txt."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from pathlib import Path

from converge_dsl.clock import FakeClock
from converge_dsl.models import (
    Message,
    ModelError,
    ModelRequest,
    RecordingModel,
    ReplayModel,
    ScriptedModel,
    build_model,
)

EXPECTED = Path(__file__).parent / "expected" / "errors.txt"
SCRIPT = (
    "apiVersion: converge-dsl/v1\nkind: ModelScript\nrules:\n"
    "  - match: {suggestor: scan}\n    reply: ok\n"
    "  - match: {suggestor: slow}\n    error: {code: E_TIMEOUT, message: slow}\n"
)


def req(text: str, suggestor: str = "scan", turn: int = 0) -> ModelRequest:
    return ModelRequest("default", (Message.text("user", text),), suggestor=suggestor, turn=turn)


def message_of(action: Callable[[], object]) -> str:
    try:
        action()
    except ModelError as exc:
        return str(exc)
    raise AssertionError("no error raised")


def render_messages(tmp_path: Path) -> str:
    scripted = ScriptedModel.from_text(SCRIPT, "market.script.yaml", clock=FakeClock())
    cassette = tmp_path / "run.jsonl"
    asyncio.run(RecordingModel(scripted, cassette).call(req("Market: Nordic SaaS")))
    replay = ReplayModel.from_file(cassette)
    messages = [
        message_of(
            lambda: build_model(
                "fast",
                {
                    "adapter": "openai",
                    "base_url": "http://127.0.0.1:8080/v1",
                    "model": "m",
                    "accounts": [{"name": "main", "api_key_env": "OPENAI_API_KEY"}],
                },
                base_dir=tmp_path,
                env={},
                clock=FakeClock(),
                rng=random.Random(0),
            )
        ),
        message_of(lambda: asyncio.run(scripted.call(req("hi", suggestor="other")))),
        message_of(lambda: asyncio.run(replay.call(req("Market: Danish SaaS")))),
        message_of(lambda: asyncio.run(scripted.call(req("hi", suggestor="slow")))),
        message_of(lambda: ReplayModel.from_file(tmp_path / "missing.jsonl")),
    ]
    return "\n---\n".join(messages) + "\n"


def test_messages_match_the_expected_text(tmp_path: Path) -> None:
    assert render_messages(tmp_path) == EXPECTED.read_text()
