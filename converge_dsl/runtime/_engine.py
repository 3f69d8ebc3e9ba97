"""From a compiled pipeline to a ready engine, and the registry of every suggestor kind.

`SUGGESTOR_KINDS` is `converge_dsl.validation.KINDS`: the front end's seed,
rule and llm plus `agent` and `pack`, each package imported only when a
pipeline uses its kind (a rules-only run never imports the agents or packs).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from converge_dsl.clock import Clock
from converge_dsl.compiler import CompiledPipeline
from converge_dsl.engine import Budget, Engine, UsageMeter
from converge_dsl.frontend import KindRegistry
from converge_dsl.validation import KINDS

SUGGESTOR_KINDS: KindRegistry = KINDS


def build_engine(
    compiled: CompiledPipeline,
    sink: Callable[[BaseModel], None],
    clock: Clock,
    usage: UsageMeter | None = None,
    *,
    budget: Budget | None = None,
) -> Engine:
    """The engine for a compiled pipeline, its suggestors registered in order.

    `usage` is the run's meter (the one the compiled suggestors and models
    record into and ask first); without it the engine makes its own. `budget`
    replaces the compiled pipeline's for this run. A sink
    with a false `listening` attribute (a `TraceWriter` with no file and no
    listener) is not given to the engine, so no event objects are built.
    """
    engine = Engine(
        budget=compiled.budget if budget is None else budget,
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
