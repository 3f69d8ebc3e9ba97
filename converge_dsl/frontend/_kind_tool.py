"""The `tool` suggestor kind's front end: its typed spec and its registration.

A `tool` suggestor calls one MCP tool (`call: mcp:SERVER/TOOL`) with templated
`arguments` when its dependencies change, and maps the tool's JSON result to
proposals as an llm suggestor maps its answer (`output`: `format` json by
default, `schema`, `id`, `content`, `confidence`, `data`). Deterministic given
the tool's answer. What a kind carries and how it is registered:
docs/architecture.md §16.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from converge_dsl._json_types import JsonObject, JsonSchema
from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend._kind_llm import LlmOutput
from converge_dsl.frontend._kinds import (
    GraphStyle,
    SpecHead,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
    required,
)
from converge_dsl.frontend._tool_specs import tool_reference
from converge_dsl.sandbox import CONTEXT_NAMES


class ToolCallSpec(SuggestorSpec):
    """A `tool` suggestor: `server` and `tool` (from `call`), its `arguments` as written
    (a text value anywhere in them is a template over the context), and `output`."""

    _fields = (*SuggestorSpec._fields, "server", "tool", "arguments", "output")
    __slots__ = ("arguments", "output", "server", "tool")

    def __init__(
        self,
        head: SpecHead,
        *,
        server: str,
        tool: str,
        arguments: JsonObject,
        output: LlmOutput,
        missing: tuple[JsonPath, ...] = (),
    ) -> None:
        super().__init__(*head, missing=missing)
        self.server = server
        self.tool = tool
        self.arguments = arguments
        self.output = output

    def argument_templates(self) -> Iterator[tuple[JsonPath, str]]:
        """Each text value of `arguments`, at its path relative to the suggestor."""

        def walk(path: JsonPath, value: object) -> Iterator[tuple[JsonPath, str]]:
            if isinstance(value, str):
                yield path, value
            elif isinstance(value, Mapping):
                for key, inner in value.items():
                    yield from walk((*path, key), inner)
            elif isinstance(value, list):
                for index, inner in enumerate(value):
                    yield from walk((*path, index), inner)

        yield from walk(("arguments",), self.arguments)

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        found: list[tuple[JsonPath, object, frozenset[str], bool]] = [
            (path, text, CONTEXT_NAMES, False) for path, text in self.argument_templates()
        ]
        found += self.output.item_templates()
        return (*super().templates(extra), *self.sites(extra, found))

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return (*self.dependency_references(), *self.references("target", self.output.key))

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return ()

    def tool_references(self) -> tuple[tuple[JsonPath, str, str], ...]:
        return (((*self.path, "call"), self.server, self.tool),)

    def schemas(self) -> tuple[tuple[str, JsonPath, Any], ...]:
        schema = self.output.schema
        if schema is None:
            return ()
        return (("output.schema", (*self.output.path, "schema"), schema),)

    def items(self) -> tuple[JsonPath, JsonSchema | None] | None:
        output = self.output
        return (output.path, output.schema) if output.json else None

    def details(self) -> tuple[tuple[str, str], ...]:
        return (("call", f"mcp:{self.server}/{self.tool}"),)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def parse_tool(path: JsonPath, raw: Mapping[str, Any]) -> ToolCallSpec:
    missing: list[JsonPath] = []
    target = str(raw.get("target", ""))
    call = str(required(raw, "call", path, missing, ""))
    server, tool = tool_reference(call) or ("", "")
    output: Mapping[str, Any] = raw.get("output") or {}
    schema = output.get("schema")
    arguments = raw.get("arguments")
    return ToolCallSpec(
        SuggestorSpec.head("tool", path, raw, (target,)),
        server=server,
        tool=tool,
        arguments=arguments if isinstance(arguments, Mapping) else {},
        output=LlmOutput(
            (*path, "output"),
            target,
            str(output.get("format", "json")),
            schema if isinstance(schema, dict) else None,
            _text(output.get("id")),
            output.get("content"),
            output.get("confidence"),
            _text(output.get("data")),
        ),
        missing=tuple(missing),
    )


TOOL = SuggestorKind(
    "tool",
    "toolSuggestor",
    None,
    parse_tool,
    (),
    "converge_dsl.compiler._tool:build_tool",
    GraphStyle("#ecfeff", "#0891b2", "#164e63", "box", "tool"),
    # No GenAI operation of its own: each of its calls is an `execute_tool` span.
)
