"""The `llm` suggestor kind: render a prompt, call a model, parse its answer into proposals.

Output formats (docs/architecture.md §14): `text` (the whole answer is one item), `lines`
(each non-blank line is an item) and `json` (an array of items, or one object =
one item). With `output.schema`, the parsed JSON answer must satisfy that JSON
Schema. An answer that does not parse or conform yields one `diagnostic`
proposal (id `llm:invalid-output:<suggestor>:<cycle>`) and none of its items.

`id`, `content`, `confidence` are templates over `item` and `index`.
Defaults: id `<suggestor>-<index>`, content the item itself, confidence 0.7.
Every call is recorded in the usage meter (1 call + the tokens the model
reports). Provenance is `name@pipeline` with the model id and account label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from converge_dsl import codes
from converge_dsl.diagnostics import JsonPath
from converge_dsl.engine.types import (
    AgentEffect,
    ContextView,
    ProposedFact,
    Provenance,
    freeze_json,
)
from converge_dsl.models.port import Message, Model, ModelRequest

from ._common import CoreSuggestor, SuggestorCore, compile_value, render_confidence, render_value
from ._context import CompileContext, UsageRecorder
from ._scope import with_item
from ._template import CompiledTemplate

ITEM_NAMES = frozenset({"item", "index"})
DEFAULT_LLM_CONFIDENCE = 0.7


class _BadAnswer(Exception):
    """The answer does not parse or conform (becomes a diagnostic proposal)."""


@dataclass(frozen=True, slots=True)
class LlmSuggestor(CoreSuggestor):
    core: SuggestorCore
    model_name: str
    model: Model
    usage: UsageRecorder
    target: str
    system: CompiledTemplate | None
    user: CompiledTemplate
    format: str
    validator: Any  # a jsonschema validator or None
    item_id: CompiledTemplate | None
    item_content: Any
    item_confidence: Any
    max_tokens: int | None
    temperature: float | None

    async def execute(self, ctx: ContextView) -> AgentEffect:
        core = self.core
        scope = core.scopes.scope(ctx)
        cycle = ctx.cycle
        system = (
            ()
            if self.system is None
            else (self.system.render(scope, suggestor=core.name, cycle=cycle),)
        )
        request = ModelRequest(
            model=self.model.model_id(),
            messages=(
                Message.text("user", self.user.render(scope, suggestor=core.name, cycle=cycle)),
            ),
            system=system,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            suggestor=core.name,
        )
        answer = await self.model.call(request)
        self.usage.record(
            model_calls=1,
            input_tokens=answer.usage.input_tokens,
            output_tokens=answer.usage.output_tokens,
        )
        provenance = Provenance(
            core.source, answer.model_id or self.model.model_id(), answer.account
        )
        try:
            items = self._items(answer.text)
        except _BadAnswer as exc:
            return AgentEffect((self._diagnostic(str(exc), cycle, provenance),))
        proposals = []
        for index, item in enumerate(items):
            item_scope = with_item(scope, item, index)
            item_id = (
                f"{core.name}-{index}"
                if self.item_id is None
                else self.item_id.render(item_scope, suggestor=core.name, cycle=cycle)
            )
            content = (
                item
                if self.item_content is None
                else render_value(self.item_content, item_scope, core.name, cycle)
            )
            if not isinstance(content, str | Mapping):
                content = json.dumps(content, ensure_ascii=False)
            proposals.append(
                ProposedFact(
                    key=self.target,
                    id=item_id,
                    content=content,
                    confidence=render_confidence(
                        self.item_confidence, item_scope, core.name, cycle
                    ),
                    provenance=provenance,
                )
            )
        return AgentEffect(tuple(proposals))

    def _items(self, text: str) -> list[Any]:
        if self.format == "text":
            return [text.strip()] if text.strip() else []
        if self.format == "lines":
            return [line.strip() for line in text.splitlines() if line.strip()]
        try:
            data = json.loads(_strip_fence(text))
        except ValueError as exc:
            raise _BadAnswer(f"answer is not JSON: {exc}") from None
        if self.validator is not None:
            error = jsonschema.exceptions.best_match(self.validator.iter_errors(data))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "<root>"
                raise _BadAnswer(f"answer does not match output.schema at {where}: {error.message}")
        if isinstance(data, list):
            return data
        if isinstance(data, dict):
            return [data]
        raise _BadAnswer(f"answer is a JSON {type(data).__name__}, not an array or object")

    def _diagnostic(self, reason: str, cycle: int, provenance: Provenance) -> ProposedFact:
        return ProposedFact(
            key="diagnostic",
            id=f"llm:invalid-output:{self.core.name}:{cycle}",
            content=freeze_json(
                {
                    "suggestor": self.core.name,
                    "target": self.target,
                    "cycle": cycle,
                    "error": reason,
                    "location": str(self.core.span),
                }
            ),
            confidence=1.0,
            provenance=provenance,
        )


def _strip_fence(text: str) -> str:
    """Accept an answer wrapped in a ``` fence (models often add one)."""
    stripped = text.strip()
    if stripped.startswith("```"):
        body = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        return body.rsplit("```", 1)[0]
    return stripped


def build_llm(spec: Mapping[str, Any], path: JsonPath, ctx: CompileContext) -> LlmSuggestor:
    model_name = str(spec["model"])
    model = ctx.models.get(model_name)
    if model is None:
        raise ctx.invalid(
            codes.COMPILE_UNKNOWN_MODEL,
            f"unknown model {model_name!r}",
            (*path, "model"),
            hint=f"declared models: {', '.join(sorted(ctx.models)) or 'none'}",
        )
    target = str(spec["target"])
    prompt = spec.get("prompt") or {}
    output = spec.get("output") or {"format": "text"}
    out_path = (*path, "output")
    validator = None
    if "schema" in output:
        schema = output["schema"]
        try:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
        except jsonschema.exceptions.SchemaError as exc:
            raise ctx.invalid(
                codes.COMPILE_BAD_OUTPUT_SCHEMA,
                f"output.schema is not a valid JSON Schema: {exc.message}",
                (*out_path, "schema"),
            ) from None
        validator = cls(schema)
    item_id = output.get("id")
    return LlmSuggestor(
        core=SuggestorCore.of(spec, path, ctx, (target,)),
        model_name=model_name,
        model=model,
        usage=ctx.usage,
        target=target,
        system=None
        if "system" not in prompt
        else ctx.template(str(prompt["system"]), (*path, "prompt", "system")),
        user=ctx.template(str(prompt["user"]), (*path, "prompt", "user")),
        format=str(output.get("format", "text")),
        validator=validator,
        item_id=None
        if item_id is None
        else ctx.template(str(item_id), (*out_path, "id"), extra=ITEM_NAMES),
        item_content=None
        if "content" not in output
        else compile_value(output["content"], (*out_path, "content"), ctx, ITEM_NAMES),
        item_confidence=compile_value(
            output.get("confidence", DEFAULT_LLM_CONFIDENCE),
            (*out_path, "confidence"),
            ctx,
            ITEM_NAMES,
        ),
        max_tokens=spec.get("max_tokens"),
        temperature=spec.get("temperature"),
    )
