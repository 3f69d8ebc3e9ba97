"""The `tool` suggestor kind: call one MCP tool with rendered arguments, map its result.

The arguments' text values are templates over the context, rendered at each
execution; the call goes through the run's `ToolCaller` (`ctx.tools`: the
server started on first use, the arguments checked against its input schema,
`budget.max_tool_calls`, the result capped and redacted). The result's text is
the answer an llm suggestor's `output` maps (`ItemMapping`, the same code): a
`json` result's items become proposals. A tool's error, a refused call or a
failed server, and a result that does not parse or conform, yield one
`diagnostic` proposal (`tool:error:<suggestor>:<cycle>`,
`tool:invalid-output:<suggestor>:<cycle>`) and no item. A call refused by
`budget.max_tool_calls` proposes nothing: the run stops after the cycle with
`tool_call_budget_exhausted`, as an llm suggestor's refused call does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from converge_dsl import codes
from converge_dsl._json_types import JsonObject, JsonValue
from converge_dsl.engine.types import AgentEffect, ContextView, Provenance
from converge_dsl.frontend import ToolCallSpec
from converge_dsl.sandbox import Exhausted

from ._common import CoreSuggestor, SuggestorCore, compile_value, render_value
from ._context import CompileContext, RunParts, ToolCaller
from ._llm import ItemMapping, _BadAnswer, compile_mapping
from ._scope import with_item

DEFAULT_TOOL_CONFIDENCE = 1.0  # the tool's answer is data, not a model's guess


@dataclass(frozen=True, slots=True)
class ToolSuggestor(CoreSuggestor):
    core: SuggestorCore
    server: str
    tool: str
    arguments: Any  # compiled by `compile_value`
    mapping: ItemMapping
    tools: ToolCaller | None

    def for_run(self, run: RunParts) -> ToolSuggestor:
        """This suggestor in another run: that run's tool servers."""
        return replace(self, tools=run.tools)

    def provenance(self) -> Provenance:
        return Provenance(self.core.source, model_id=f"mcp:{self.server}/{self.tool}")

    async def execute(self, ctx: ContextView) -> AgentEffect:
        core, cycle = self.core, ctx.cycle
        scope = core.scopes.scope(ctx)
        provenance = self.provenance()
        if self.tools is None:
            return AgentEffect((self._error("the run has no tool servers", cycle, provenance),))
        arguments = _plain(render_value(self.arguments, scope, core.name, cycle))
        assert isinstance(arguments, dict)
        answered = await self.tools.answer(core.name, cycle, self.server, self.tool, arguments)
        if answered is None:  # budget.max_tool_calls: the run stops after this cycle
            return AgentEffect(())
        text, is_error = answered
        if is_error:
            return AgentEffect((self._error(text, cycle, provenance),))
        try:
            items = self.mapping.items(text)
        except _BadAnswer as exc:
            return AgentEffect(
                (
                    core.diagnostic(
                        "tool:invalid-output",
                        cycle,
                        f"{core.name} (at {core.span}) got no usable result: {exc}",
                        provenance,
                        target=self.mapping.target,
                        error=str(exc),
                    ),
                )
            )
        except Exhausted as exc:  # the result was too costly to check: located here
            if exc.code is not None and exc.span is None:
                exc.span = core.span
            raise
        propose = self.mapping.proposal
        return AgentEffect(
            tuple(
                propose(with_item(scope, item, index), item, index, cycle, provenance)
                for index, item in enumerate(items)
            )
        )

    def _error(self, text: str, cycle: int, provenance: Provenance) -> Any:
        core = self.core
        return core.diagnostic(
            "tool:error",
            cycle,
            f"{core.name} (at {core.span}): mcp:{self.server}/{self.tool} failed: {text}",
            provenance,
            target=self.mapping.target,
            error=text,
        )


def _plain(value: Any) -> JsonValue:
    """A rendered value as plain JSON types (dicts and lists) for the wire."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value  # type: ignore[no-any-return]


def build_tool(spec: ToolCallSpec, ctx: CompileContext) -> ToolSuggestor:
    if not spec.server:
        raise ctx.invalid(
            codes.UNKNOWN_TOOL_SERVER,
            "call must name a tool as mcp:SERVER/TOOL",
            (*spec.path, "call"),
        )
    mapping, _ = compile_mapping(
        spec.name, spec.output, ctx, default_confidence=DEFAULT_TOOL_CONFIDENCE
    )
    arguments: JsonObject = spec.arguments
    return ToolSuggestor(
        core=SuggestorCore.of(spec, ctx),
        server=spec.server,
        tool=spec.tool,
        arguments=compile_value(dict(arguments), (*spec.path, "arguments"), ctx),
        mapping=mapping,
        tools=ctx.tools,
    )
