"""From a compiled pipeline to a ready engine, and the table of every suggestor kind.

`SUGGESTOR_BUILDERS` is the compiler's own builders (seed, rule, llm) plus
`agent` and `pack`, which live above the compiler: the runtime composes them,
importing each package only when a pipeline uses that kind (a rules-only run
never imports the agents or packs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from converge_dsl.clock import Clock
from converge_dsl.compiler import BUILDERS, CompileContext, CompiledPipeline, SuggestorBuilder
from converge_dsl.diagnostics import JsonPath
from converge_dsl.engine import Engine, Suggestor, UsageMeter


def _agent(spec: Mapping[str, Any], path: JsonPath, ctx: CompileContext) -> Suggestor:
    from converge_dsl.agents import compile_agent

    return compile_agent(spec, path, ctx)


def _pack(spec: Mapping[str, Any], path: JsonPath, ctx: CompileContext) -> Suggestor:
    from converge_dsl.packs import compile_pack_suggestor

    return compile_pack_suggestor(spec, path, ctx)


SUGGESTOR_BUILDERS: Mapping[str, SuggestorBuilder] = MappingProxyType(
    {**BUILDERS, "agent": _agent, "pack": _pack}
)


def build_engine(
    compiled: CompiledPipeline,
    sink: Callable[[BaseModel], None],
    clock: Clock,
    usage: UsageMeter | None = None,
) -> Engine:
    """The engine for a compiled pipeline, its suggestors registered in order.

    `usage` is the run's meter (the one the compiled suggestors and models
    record into and ask first); without it the engine makes its own. A sink
    with a false `listening` attribute (a `TraceWriter` with no file and no
    listener) is not given to the engine, so no event objects are built.
    """
    engine = Engine(
        budget=compiled.budget,
        policy=compiled.promotion,
        invariants=compiled.invariants,
        clock=clock,
        on_error=compiled.on_error,
        declared_keys=compiled.declared_keys,
        events=sink if getattr(sink, "listening", True) else None,
        record_events=False,
        usage=usage,
    )
    engine.register_all(compiled.suggestors)
    return engine
