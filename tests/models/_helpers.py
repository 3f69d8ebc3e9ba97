"""Builders shared by the model tests."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from converge_dsl.clock import FakeClock
from converge_dsl.models import (
    Message,
    Model,
    ModelRequest,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSpec,
    build_model,
)
from converge_dsl.models.fakeserver import FakeProviderServer

T = TypeVar("T")
KEYS = {"main": "sk-main-0123456789abcdef", "backup": "sk-backup-0123456789abcdef"}


def http_model(
    server: FakeProviderServer,
    wire: str,
    *,
    accounts: tuple[str, ...] = ("main",),
    clock: FakeClock | None = None,
    build: Mapping[str, Any] | None = None,
    **extra: Any,
) -> Model:
    """`extra` goes into the model's configuration, `build` to `build_model`."""
    config: dict[str, Any] = {
        "adapter": wire,
        "base_url": server.openai_base_url if wire == "openai" else server.url,
        "model": "fake-model",
        "accounts": [{"name": a, "api_key_env": f"{a.upper()}_KEY"} for a in accounts],
        **extra,
    }
    env = {f"{a.upper()}_KEY": KEYS[a] for a in KEYS}
    return build_model(
        "fast",
        config,
        base_dir=Path("."),
        env=env,
        clock=clock or FakeClock(),
        rng=random.Random(7),
        **(build or {}),
    )


def ask(text: str = "Say hello", *, tools: bool = False, turn: int | None = None) -> ModelRequest:
    specs = (ToolSpec("context.read", "Read facts", {"type": "object"}),) if tools else ()
    return ModelRequest(
        "fast", (Message.text("user", text),), system=("Be brief.",), tools=specs, turn=turn
    )


def using(model: Model, action: Callable[[Model], Awaitable[T]]) -> T:
    """Run `action(model)` in a fresh loop, closing the model afterwards."""

    async def main() -> T:
        try:
            return await action(model)
        finally:
            await model.aclose()

    return asyncio.run(main())


def conversation() -> ModelRequest:
    """An agent's history with contributor (system) messages: leading, persisted
    mid-conversation, between a tool call and its result, and transient at the end."""
    read = ToolSpec("context.read", "Read facts", {"type": "object"})
    return ModelRequest(
        "fast",
        (
            Message.text("system", "You are the scanner."),
            Message.text("user", "Find competitors."),
            Message.text("system", "Plan: scan, then propose."),
            Message(
                "assistant",
                (TextPart("Looking."), ToolCallPart("c1", "context.read", {"key": "strategies"})),
            ),
            Message.text("system", "Turn 1 of 5."),
            Message("tool", (ToolResultPart("c1", "[]"),)),
            Message("assistant", (ToolCallPart("c2", "context.read", {"key": "x"}),)),
            Message("tool", (ToolResultPart("c2", "boom", is_error=True),)),
            Message.text("system", "Reminder: propose facts."),
        ),
        system=("Be brief.",),
        tools=(read,),
    )
