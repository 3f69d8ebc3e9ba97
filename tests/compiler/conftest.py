"""Fixtures for compiler unit tests: compile YAML text with fake models and a usage recorder."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from converge_dsl.compiler import CompiledPipeline, compile_pipeline
from converge_dsl.engine.budget import Reservation, StopReason
from converge_dsl.frontend import load_text
from converge_dsl.models.port import Message, ModelRequest, ModelReturn, Usage

HEADER = "apiVersion: converge-dsl/v1\nkind: Pipeline\nname: t\n"


@dataclass
class FakeModel:
    """Answers every request with `answer`; remembers the requests."""

    answer: str
    requests: list[ModelRequest] = field(default_factory=list)

    def model_id(self) -> str:
        return "fake-1"

    async def call(self, request: ModelRequest) -> ModelReturn:
        self.requests.append(request)
        return ModelReturn(
            Message.text("assistant", self.answer), Usage(3, 5), model_id="fake-1", account="main"
        )

    async def aclose(self) -> None:
        return None


@dataclass
class Usage_:
    calls: list[tuple[int, int, int]] = field(default_factory=list)

    def record(
        self, *, model_calls: int = 0, input_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        self.calls.append((model_calls, input_tokens, output_tokens))

    def can_call(self) -> bool:
        return True

    def reserve(
        self, tokens_estimate: int = 0, answer_cap: int | None = None
    ) -> Reservation | None:
        return Reservation(self, 0, answer_cap)  # type: ignore[arg-type]  # settles into `record`

    async def reserve_call(
        self, tokens_estimate: int = 0, answer_cap: int | None = None
    ) -> Reservation | None:
        return self.reserve(tokens_estimate, answer_cap)

    def _unhold(self, tokens: int) -> None:
        return None

    def _settle(self, held_tokens: int, tokens_in: int, tokens_out: int) -> None:
        self.record(model_calls=1, input_tokens=tokens_in, output_tokens=tokens_out)

    def note_budget_refusal(self) -> StopReason:
        return StopReason.ERROR


Compile = Callable[..., CompiledPipeline]


@pytest.fixture
def usage() -> Usage_:
    return Usage_()


@pytest.fixture
def compile_yaml(usage: Usage_) -> Compile:
    def build(body: str, models: dict[str, Any] | None = None, **inputs: Any) -> CompiledPipeline:
        document = load_text(HEADER + textwrap.dedent(body), "p.yaml")
        return compile_pipeline(document, inputs=inputs, models=models or {}, usage=usage)

    return build


@pytest.fixture
def fake_model() -> type[FakeModel]:
    """The `FakeModel` class (test modules cannot import conftest under importlib mode)."""
    return FakeModel
