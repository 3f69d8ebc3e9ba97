"""Shared test helpers: compile an agent from pipeline YAML with scripted models."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from converge_dsl.agents import AgentSuggestor
from converge_dsl.compiler import compile_pipeline
from converge_dsl.engine.budget import Budget, UsageMeter
from converge_dsl.engine.context import Context
from converge_dsl.engine.types import AgentEffect, Fact, PromotionRecord, Provenance
from converge_dsl.frontend import load_text
from converge_dsl.models import ScriptedModel
from converge_dsl.models.port import Model
from converge_dsl.runtime import SUGGESTOR_KINDS

HEADER = """apiVersion: converge-dsl/v1
kind: Pipeline
name: t
models:
  main: {adapter: scripted, script: main.script.yaml}
  cheap: {adapter: scripted, script: cheap.script.yaml}
"""


def script(body: str) -> str:
    return "apiVersion: converge-dsl/v1\nkind: ModelScript\n" + body


def scripted(body: str, file: str = "main.script.yaml") -> ScriptedModel:
    return ScriptedModel.from_text(script(body), file)


class Recorder:
    """An event sink that keeps events."""

    def __init__(self) -> None:
        self.events: list[BaseModel] = []

    def __call__(self, event: BaseModel) -> None:
        self.events.append(event)

    def of(self, type_: str) -> list[Any]:
        return [e for e in self.events if getattr(e, "type", None) == type_]


def compile_agents(
    suggestors_yaml: str,
    models: Mapping[str, Model],
    *,
    sink: Recorder | None = None,
    meter: UsageMeter | None = None,
) -> dict[str, AgentSuggestor]:
    document = load_text(HEADER + "suggestors:\n" + suggestors_yaml, "p.yaml")
    compiled = compile_pipeline(
        document,
        inputs={},
        models=models,
        usage=meter or UsageMeter(Budget()),
        events=sink,
        kinds=SUGGESTOR_KINDS,
    )
    return {s.name: s for s in compiled.suggestors if isinstance(s, AgentSuggestor)}


def fact(key: str, id_: str, content: str) -> Fact:
    return Fact(key, id_, content, Provenance("seeds@t"), 1.0, PromotionRecord("gate", "auto", 0))


def run(agent: AgentSuggestor, *facts: Fact, cycle: int = 1) -> AgentEffect:
    return asyncio.run(agent.execute(Context.from_facts(facts, cycle=cycle)))


class Recording:
    """Wraps a model, keeping every request and return."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.requests: list[Any] = []
        self.returns: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def call(self, req: Any) -> Any:
        self.requests.append(req)
        answer = await self.inner.call(req)
        self.returns.append(answer)
        return answer


def texts(request: Any) -> list[str]:
    """The text of each message of a request."""
    return [m.text_content for m in request.messages]
