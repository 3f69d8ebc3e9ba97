"""Builders shared by the model tests."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from converge_dsl.clock import FakeClock
from converge_dsl.models import Message, Model, ModelRequest, ToolSpec, build_model
from converge_dsl.models.fakeserver import FakeProviderServer

T = TypeVar("T")
KEYS = {"main": "sk-main-0123456789abcdef", "backup": "sk-backup-0123456789abcdef"}


def http_model(
    server: FakeProviderServer,
    wire: str,
    *,
    accounts: tuple[str, ...] = ("main",),
    clock: FakeClock | None = None,
    **extra: Any,
) -> Model:
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
