"""The `llm` suggestor kind's front end: its typed spec and its registration.

What a kind carries and how it is registered: docs/architecture.md §16.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend._kinds import (
    ITEM_NAMES,
    GraphStyle,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
)
from converge_dsl.sandbox import CONTEXT_NAMES


class LlmSpec(SuggestorSpec):
    """An `llm` suggestor: a prompt to a model whose answer's items become proposals to
    its `target`; `output` templates see `item` and `index`."""

    __slots__ = ()

    @property
    def model(self) -> str:
        return str(self.raw["model"])

    @property
    def prompt(self) -> Mapping[str, Any]:
        prompt: Mapping[str, Any] = self.raw.get("prompt") or {}
        return prompt

    @property
    def max_tokens(self) -> int | None:
        value = self.raw.get("max_tokens")
        return None if value is None else int(value)

    @property
    def temperature(self) -> float | None:
        value = self.raw.get("temperature")
        return None if value is None else float(value)

    @property
    def output(self) -> Mapping[str, Any]:
        output: Mapping[str, Any] = self.raw.get("output") or {}
        return output

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        prompt, output = self.prompt, self.output
        found: list[tuple[JsonPath, object, frozenset[str], bool]] = [
            (("prompt", field), prompt.get(field), CONTEXT_NAMES, False)
            for field in ("system", "user")
        ]
        found += [
            (("output", field), output.get(field), ITEM_NAMES, False)
            for field in ("id", "content", "confidence")
        ]
        found.append((("output", "data"), output.get("data"), ITEM_NAMES, True))
        return (*super().templates(extra), *self.sites(extra, found))

    def schemas(self) -> tuple[tuple[str, JsonPath, Any], ...]:
        schema = self.output.get("schema")
        if not isinstance(schema, dict):
            return ()
        return (("output.schema", (*self.path, "output", "schema"), schema),)

    def items(self) -> tuple[JsonPath, Any] | None:
        """A `json` answer's items are JSON (a text or lines item is a string)."""
        if self.output.get("format") != "json":
            return None
        schema = self.output.get("schema")
        return (*self.path, "output"), schema if isinstance(schema, dict) else None


def parse_llm(path: JsonPath, raw: Mapping[str, Any]) -> LlmSpec:
    return LlmSpec.common("llm", path, raw, (str(raw.get("target", "")),))


LLM = SuggestorKind(
    "llm",
    "llmSuggestor",
    None,
    parse_llm,
    (),
    "converge_dsl.compiler._llm:build_llm",
    GraphStyle("#f3e8ff", "#9333ea", "#581c87", "box", "llm"),
)
