"""Run orchestration: load -> settings -> usage meter -> models -> compile -> engine run.

`run_pipeline(options)` is the one entry point (`converge-dsl run` is a thin
shell over it). It returns a `RunOutcome` (the engine's result, the compiled
pipeline, the run-result document and the exit code) or raises a
`ConvergeError` (`PipelineInvalid` exit 2, `UsageError` exit 3, ...).

The run's one `UsageMeter` is made from the compiled settings before anything
that records into it: the models (their attempt gate and deadline), the
compiled suggestors, then the engine. The runtime never reads the YAML data:
the compiler's typed settings and model declarations say all it needs.

Human in the loop: a run that stops with `hitl_pause` checkpoints its pending
proposals (with `checkpoint`). `resume` + `decisions` (id -> approve) continues
it through `Engine.resume` once every pending id is decided; until then the
decisions are kept in the checkpoint folder and the run stays paused
(see `_resume`).

Checkpoints (`_checkpoint`): a fresh run with `checkpoint` starts a journal
holding the inputs as given; `resume` reads and verifies it first, takes its
inputs when none are given (other inputs are refused), gives stateful
suggestors their per-run state back, and appends to the same journal.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl.compiler import (
    LOCK_FILE,
    CompileCache,
    compile_pipeline,
    compile_settings,
    declare_models,
    open_cache,
)
from converge_dsl.engine import Engine, ProposedFact, UsageMeter
from converge_dsl.engine.state import RunResult
from converge_dsl.errors import ConvergeError, UsageError
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.models.port import Model

if TYPE_CHECKING:
    from ._otel import Telemetry

from ._checkpoint import Checkpoint, CheckpointStore, folder_lock, pipeline_digest
from ._checkpoint_key import checkpoint_key
from ._engine import SUGGESTOR_KINDS, build_engine
from ._models import build_models
from ._options import RunOptions
from ._outcome import RunOutcome, outcome
from ._outputs import check_outputs
from ._resume import continue_run
from ._suggestor_state import restore_states
from ._telemetry import describe_run, start_telemetry
from ._trace import TraceWriter, wall_clock
from ._traced_model import CallTracer


def load_document(
    path: Path,
    on_fetch: Callable[[str], object] | None = None,
    roots: Sequence[Path] | None = None,
) -> LoadedDocument:
    """Load and validate (the same diagnostics as `validate`); raises `PipelineInvalid`.

    Locked packs the cache lacks are fetched first; `on_fetch` hears one line for each.
    Files the pipeline names must lie in its folder or one of `roots`.
    """
    from converge_dsl import validation

    if not path.is_file():
        raise UsageError(f"no such pipeline file: {path}")
    return validation.load_pipeline(path, fetch=True, on_fetch=on_fetch, roots=roots)


async def run_pipeline(options: RunOptions) -> RunOutcome:
    """Run the pipeline of `options` to a stop (see the module docstring)."""
    if options.decisions and options.resume is None:
        raise UsageError(
            "--approve/--reject/--decisions continue a paused run",
            hint="add --resume DIR (the --checkpoint folder of the paused run)",
        )
    telemetry = start_telemetry(options)  # `--otel` without the SDK: refused before any work
    try:
        document = load_document(options.pipeline, options.on_fetch, options.roots)
        _freeze(options)
        check_outputs(declare_models(document), options)
        store_dir = options.checkpoint or options.resume
        with folder_lock(store_dir, "--resume" if options.resume else "--checkpoint"):
            return await _run_locked(document, options, store_dir, telemetry)
    finally:
        if telemetry is not None:
            telemetry.close()  # bounded: a collector that is down only costs a warning


async def _run_locked(
    document: LoadedDocument,
    options: RunOptions,
    store_dir: Path | None,
    telemetry: Telemetry | None = None,
) -> RunOutcome:
    listeners = options.listeners
    if telemetry is not None:
        listeners = (*listeners, telemetry.recorder)
    sink = TraceWriter({}, options.trace, listeners, wall=wall_clock(options.clock))
    models: dict[str, Model] = {}
    store = None if store_dir is None else CheckpointStore(store_dir, checkpoint_key(options.env))
    try:
        checkpoint = _read_checkpoint(store, document, options)
        inputs = options.inputs or (checkpoint.inputs if checkpoint is not None else {})
        settings = compile_settings(document, inputs=inputs)
        meter = UsageMeter(settings.budget, clock=options.clock)
        models = build_models(settings, options, attempt_gate=meter.allow_attempt)
        models = _traced(models, sink, options, telemetry)
        cache = _compile_cache(document, settings.inputs, options)
        with contextlib.nullcontext() if cache is None else cache.session():
            compiled = compile_pipeline(
                settings, models=models, usage=meter, events=sink, kinds=SUGGESTOR_KINDS
            )
        _freeze(options)
        sink.set_spans(compiled.spans)
        if telemetry is not None:
            describe_run(telemetry, compiled, options)
        engine = build_engine(compiled, sink, options.clock, meter)
        digest = pipeline_digest(document.text, dict(compiled.inputs))
        if store is not None and checkpoint is not None:
            checkpoint.check_digest(digest)
            restore_states(compiled.suggestors, checkpoint.suggestors)
            store.resume(checkpoint, compiled.suggestors)
        elif store is not None:
            store.start(
                pipeline_text=document.text,
                digest=digest,
                inputs=options.inputs,
                suggestors=compiled.suggestors,
            )
        result, decided = await _execute(engine, compiled.seeds, store, checkpoint, options)
        if sink.failure is not None:  # swallowed inside a suggestor: still fatal
            raise sink.failure
        if store is not None and result.pause is not None:
            store.save(result.state)  # the pending proposals: enough to continue
        if store is not None:
            store.close()  # every record on disk before the run reports
    finally:
        if store is not None:
            with contextlib.suppress(ConvergeError):  # already failing: keep that error
                store.close()
        sink.close()
        for model in models.values():
            await model.aclose()
    return outcome(compiled, result, decided)


def _traced(
    models: dict[str, Model],
    sink: TraceWriter,
    options: RunOptions,
    telemetry: Telemetry | None,
) -> dict[str, Model]:
    """The run's models, each wrapped to trace its calls when the run's events go somewhere."""
    if not sink.listening:
        return models
    exchanges = None
    if telemetry is not None and telemetry.recorder.content:
        exchanges = telemetry.recorder.exchange
    tracer = CallTracer(sink, options.clock, exchanges)
    return {name: tracer.wrap(name, model) for name, model in models.items()}


def _freeze(options: RunOptions) -> None:
    """With `freeze_compiled`: what is alive now lives to the end (see `RunOptions`)."""
    if options.freeze_compiled:
        gc.freeze()


def _compile_cache(
    document: LoadedDocument, inputs: Mapping[str, object], options: RunOptions
) -> CompileCache | None:
    """The pipeline's on-disk compile cache, unless turned off (`compiler.open_cache`)."""
    if not options.compile_cache:
        return None
    return open_cache(
        options.env,
        document.text,
        inputs,
        options.pipeline.parent / LOCK_FILE,  # `packs.lock_path`, without importing packs
        lambda: checkpoint_key(options.env),
    )


def _read_checkpoint(
    store: CheckpointStore | None, document: LoadedDocument, options: RunOptions
) -> Checkpoint | None:
    """With `--resume`: the verified checkpoint, refused if made from another pipeline text."""
    if store is None or options.resume is None:
        return None
    checkpoint = store.read()
    checkpoint.check_pipeline(document.text)
    return checkpoint


async def _execute(
    engine: Engine,
    seeds: tuple[ProposedFact, ...],
    store: CheckpointStore | None,
    checkpoint: Checkpoint | None,
    options: RunOptions,
) -> tuple[RunResult, Mapping[str, bool]]:
    """A fresh run from the seeds, or (with `--resume`) the continuation of a checkpoint.

    A checkpoint taken before any cycle finished holds no state: it starts afresh.
    """
    if store is not None and checkpoint is not None:
        return await continue_run(engine, store, checkpoint.state, seeds, options.decisions)
    result = await engine.run(seeds, on_cycle_end=None if store is None else store.save)
    return result, {}
