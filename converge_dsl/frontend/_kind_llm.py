"""The `llm` suggestor kind's front end: its typed spec and its registration.

What a kind carries and how it is registered: docs/architecture.md §16.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl._record import Record
from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend._kinds import (
    ITEM_NAMES,
    GraphStyle,
    SpecHead,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
    required,
)
from converge_dsl.sandbox import CONTEXT_NAMES


class LlmPrompt(Record):
    """An llm suggestor's `prompt` at `path`: its `system` template (None when not written)
    and its `user` template."""

    _fields = ("path", "system", "user")
    __slots__ = _fields

    def __init__(self, path: JsonPath, system: str | None, user: str) -> None:
        self.path = path
        self.system = system
        self.user = user


class LlmOutput(Record):
    """An llm suggestor's `output` at `path`: how its answer becomes proposals to `key`.

    `format` is `text`, `lines` or `json` (`text` when a pack's template writes no
    `output`); `schema` the JSON Schema of the whole answer (None when not
    written). Each item's proposal: `id`, `content` (templates) and `confidence`
    (a number or a template) over `item` and `index`, `data` an expression over
    them; each None when not written (the compiler's defaults apply). `retries`: how
    many times an unusable answer is asked again with its errors (0 when not written).
    """

    _fields = ("path", "key", "format", "schema", "id", "content", "confidence", "data", "retries")
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (the fields, in order)
        self,
        path: JsonPath,
        key: str,
        format: str,
        schema: Mapping[str, Any] | None,
        id: str | None,
        content: object,
        confidence: object,
        data: str | None,
        retries: int = 0,
    ) -> None:
        self.path = path
        self.key = key
        self.format = format
        self.schema = schema
        self.id = id
        self.content = content
        self.confidence = confidence
        self.data = data
        self.retries = retries

    @property
    def json(self) -> bool:
        """Whether the answer is JSON (its items are JSON values, not text)."""
        return self.format == "json"

    def item_templates(self) -> list[tuple[JsonPath, object, frozenset[str], bool]]:
        """The templates over each item (path under the spec, text, names, is an expression)."""
        return [
            (("output", "id"), self.id, ITEM_NAMES, False),
            (("output", "content"), self.content, ITEM_NAMES, False),
            (("output", "confidence"), self.confidence, ITEM_NAMES, False),
            (("output", "data"), self.data, ITEM_NAMES, True),
        ]


class LlmSpec(SuggestorSpec):
    """An `llm` suggestor: a prompt to `model` whose answer's items become proposals to
    its `target`; `output` templates see `item` and `index`. `max_tokens` and
    `temperature` are None when not written."""

    _fields = (*SuggestorSpec._fields, "model", "prompt", "output", "max_tokens", "temperature")
    __slots__ = ("max_tokens", "model", "output", "prompt", "temperature")

    def __init__(
        self,
        head: SpecHead,
        *,
        model: str,
        prompt: LlmPrompt,
        output: LlmOutput,
        max_tokens: int | None,
        temperature: float | None,
        missing: tuple[JsonPath, ...] = (),
    ) -> None:
        super().__init__(*head, missing=missing)
        self.model = model
        self.prompt = prompt
        self.output = output
        self.max_tokens = max_tokens
        self.temperature = temperature

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        prompt, output = self.prompt, self.output
        found: list[tuple[JsonPath, object, frozenset[str], bool]] = [
            (("prompt", "system"), prompt.system, CONTEXT_NAMES, False),
            (("prompt", "user"), prompt.user, CONTEXT_NAMES, False),
            *output.item_templates(),
        ]
        return (*super().templates(extra), *self.sites(extra, found))

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return (*self.dependency_references(), *self.references("target", self.output.key))

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return self.references("model", self.model)

    def schemas(self) -> tuple[tuple[str, JsonPath, Any], ...]:
        schema = self.output.schema
        if schema is None:
            return ()
        return (("output.schema", (*self.output.path, "schema"), schema),)

    def items(self) -> tuple[JsonPath, Any] | None:
        """A `json` answer's items are JSON (a text or lines item is a string)."""
        output = self.output
        return (output.path, output.schema) if output.json else None


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def parse_llm(path: JsonPath, raw: Mapping[str, Any]) -> LlmSpec:
    missing: list[JsonPath] = []
    target = str(raw.get("target", ""))
    prompt: Mapping[str, Any] = raw.get("prompt") or {}
    output: Mapping[str, Any] = raw.get("output") or {}
    out_path: JsonPath = (*path, "output")
    schema = output.get("schema")
    max_tokens, temperature = raw.get("max_tokens"), raw.get("temperature")
    return LlmSpec(
        SuggestorSpec.head("llm", path, raw, (target,)),
        model=str(required(raw, "model", path, missing, "")),
        prompt=LlmPrompt(
            (*path, "prompt"),
            _text(prompt.get("system")),
            str(required(prompt, "user", (*path, "prompt"), missing, "")),
        ),
        output=LlmOutput(
            out_path,
            target,
            str(output.get("format", "text")),
            schema if isinstance(schema, dict) else None,
            _text(output.get("id")),
            output.get("content"),
            output.get("confidence"),
            _text(output.get("data")),
            int(output.get("retries", 0)),
        ),
        max_tokens=None if max_tokens is None else int(max_tokens),
        temperature=None if temperature is None else float(temperature),
        missing=tuple(missing),
    )


LLM = SuggestorKind(
    "llm",
    "llmSuggestor",
    None,
    parse_llm,
    (),
    "converge_dsl.compiler._llm:build_llm",
    GraphStyle("#f3e8ff", "#9333ea", "#581c87", "box", "llm"),
)
