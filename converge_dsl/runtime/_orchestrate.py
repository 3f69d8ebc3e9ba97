"""Run orchestration: load -> build models -> compile -> engine run, with trace and checkpoints.

`run_pipeline(options)` is the one entry point (`converge-dsl run` is a thin
shell over it). It returns a `RunOutcome` (the engine's result, the compiled
pipeline, the run-result document and the exit code) or raises a
`ConvergeError` (`PipelineInvalid` exit 2, `UsageError` exit 3, ...).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from converge_dsl.clock import Clock, SystemClock
from converge_dsl.compiler import CompiledPipeline, compile_pipeline
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.engine.state import RunResult
from converge_dsl.errors import ConvergeError, RunError, UsageError
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.models.port import Model

from ._checkpoint import CheckpointStore, pipeline_digest
from ._documents import RunResultDocument, UsageModel
from ._trace import TraceWriter

EXIT_BY_STOP: Mapping[str, int] = {
    "converged": 0,
    "cycle_budget_exhausted": 4,
    "fact_budget_exhausted": 4,
    "token_budget_exhausted": 4,
    "model_call_budget_exhausted": 4,
    "time_budget_exhausted": 4,
    "invariant_violated": 5,
    "hitl_pause": 6,
}
RUN_ERROR_CODE = "CD900"


@dataclass(frozen=True)
class RunOptions:
    """Everything `converge-dsl run` can say. Paths are as the user gave them."""

    pipeline: Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    model_overrides: Mapping[str, str] = field(default_factory=dict)
    trace: Path | None = None
    checkpoint: Path | None = None
    resume: Path | None = None
    record: Path | None = None
    replay: Path | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=SystemClock)
    listeners: tuple[Callable[[BaseModel], None], ...] = ()


@dataclass(frozen=True)
class RunOutcome:
    pipeline: CompiledPipeline
    result: RunResult
    document: RunResultDocument
    exit_code: int
    error: ConvergeError | None


def load_document(path: Path) -> LoadedDocument:
    """Load and validate (the same diagnostics as `validate`); raises `PipelineInvalid`."""
    from converge_dsl import frontend

    if not path.is_file():
        raise UsageError(f"no such pipeline file: {path}")
    loader = getattr(frontend, "load_pipeline", None) or frontend.load_file
    document: LoadedDocument = loader(path)
    return document


def _model_config(name: str, config: Mapping[str, Any], options: RunOptions) -> dict[str, Any]:
    override = options.model_overrides.get(name)
    if options.replay is not None:
        return {"adapter": "replay", "cassette": str(options.replay.resolve())}
    if override is None:
        return dict(config)
    candidate = Path(override)
    if candidate.is_file():
        return {"adapter": "replay", "cassette": str(candidate.resolve())}
    if override == config.get("adapter"):
        return dict(config)
    raise UsageError(
        f"--model {name}={override}: not a cassette file",
        hint="give a cassette path recorded with --record",
    )


def build_models(document: LoadedDocument, options: RunOptions) -> dict[str, Model]:
    from converge_dsl.models import RecordingModel, build_model

    declared: Mapping[str, Any] = document.data.get("models") or {}
    for name in options.model_overrides:
        if name not in declared:
            raise UsageError(
                f"--model {name}=...: the pipeline declares no model {name!r}",
                hint=f"declared models: {', '.join(sorted(declared)) or 'none'}",
            )
    base_dir = Path(document.file).parent
    models: dict[str, Model] = {}
    for name, config in declared.items():
        model = build_model(
            name,
            _model_config(name, config, options),
            base_dir=base_dir,
            env=options.env,
            clock=options.clock,
            rng=random.Random(0),
        )
        if options.record is not None:
            model = RecordingModel(model, options.record, append=True)
        models[name] = model
    return models


class _UsageProxy:
    """Lets the compiler hold the usage meter before the engine that owns it exists."""

    def __init__(self) -> None:
        self.target: Any = None

    def record(
        self, *, model_calls: int = 0, input_tokens: int = 0, output_tokens: int = 0
    ) -> None:
        self.target.record(
            model_calls=model_calls, input_tokens=input_tokens, output_tokens=output_tokens
        )

    def can_call(self) -> bool:
        return bool(self.target.can_call())


def build_engine(
    compiled: CompiledPipeline, sink: Callable[[BaseModel], None], clock: Clock
) -> Any:
    """The engine for a compiled pipeline, its suggestors registered in order."""
    from converge_dsl.engine import Budget, Engine, Invariant, PromotionPolicy

    engine = Engine(
        budget=Budget(**compiled.budget),
        policy=PromotionPolicy(**compiled.promotion),
        invariants=tuple(
            Invariant(i.name, i.invariant_class, i.critical, i.check)  # type: ignore[arg-type]
            for i in compiled.invariants
        ),
        clock=clock,
        on_error=compiled.on_error,  # type: ignore[arg-type]
        declared_keys=compiled.declared_keys,
        events=sink,
        record_events=False,
    )
    for suggestor in compiled.suggestors:
        engine.register(suggestor)
    return engine


def run_error_diagnostic(error: ConvergeError) -> Diagnostic | None:
    """A located run error (template at cycle 7) as a diagnostic for the JSON output."""
    if not isinstance(error, RunError) or error.span is None:
        return None
    who = f" (suggestor {error.suggestor!r}, cycle {error.cycle})" if error.suggestor else ""
    return Diagnostic.at(RUN_ERROR_CODE, f"{error.message}{who}", error.span, hint=error.hint)


async def run_pipeline(options: RunOptions) -> RunOutcome:
    document = load_document(options.pipeline)
    models = build_models(document, options)
    sink = TraceWriter({}, options.trace, options.listeners)
    usage = _UsageProxy()
    try:
        compiled = compile_pipeline(
            document, inputs=options.inputs, models=models, usage=usage, events=sink
        )
        sink.set_spans(compiled.spans)
        engine = build_engine(compiled, sink, options.clock)
        usage.target = engine.usage
        store_dir = options.checkpoint or options.resume
        store = (
            None
            if store_dir is None
            else CheckpointStore(store_dir, pipeline_digest(document.text, dict(compiled.inputs)))
        )
        start = store.load() if options.resume is not None and store is not None else None
        result: RunResult = await engine.run(
            compiled.seeds,
            resume_from=start,
            on_cycle_end=None if store is None else store.save,
        )
    finally:
        sink.close()
        for model in models.values():
            await model.aclose()
    return outcome(compiled, result)


def outcome(compiled: CompiledPipeline, result: RunResult) -> RunOutcome:
    stop = str(result.stop_reason)
    diagnostics = []
    if result.error is not None:
        located = run_error_diagnostic(result.error)
        if located is not None:
            diagnostics.append(located)
    usage = result.usage
    document = RunResultDocument.build(
        stop_reason=stop,
        cycles=result.cycles,
        facts=tuple(result.context),
        diagnostics=diagnostics,
        usage=UsageModel(
            model_calls=usage.model_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        ),
    )
    return RunOutcome(compiled, result, document, EXIT_BY_STOP.get(stop, 1), result.error)
