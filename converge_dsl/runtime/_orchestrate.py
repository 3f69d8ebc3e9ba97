"""Run orchestration: load -> build models -> compile -> engine run, with trace and checkpoints.

`run_pipeline(options)` is the one entry point (`converge-dsl run` is a thin
shell over it). It returns a `RunOutcome` (the engine's result, the compiled
pipeline, the run-result document and the exit code) or raises a
`ConvergeError` (`PipelineInvalid` exit 2, `UsageError` exit 3, ...).

Human in the loop: a run that stops with `hitl_pause` checkpoints its pending
proposals (with `checkpoint`). `resume` + `decisions` (id -> approve) continues
it through `Engine.resume` once every pending id is decided; until then the
decisions are kept in the checkpoint folder and the run stays paused.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from converge_dsl import codes
from converge_dsl.clock import Clock, SystemClock
from converge_dsl.compiler import CompiledPipeline, compile_pipeline
from converge_dsl.diagnostics import Diagnostic, SourceSpan, did_you_mean
from converge_dsl.engine.state import EngineState, HitlPause, RunResult
from converge_dsl.errors import ConvergeError, RunError, UsageError
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.models.port import Model

from ._checkpoint import (
    CHECKPOINT_FILE,
    CheckpointStore,
    check_folder,
    folder_lock,
    pipeline_digest,
)
from ._documents import RunResultDocument, UsageModel
from ._trace import TraceWriter, open_output

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
RUN_ERROR_CODE = codes.RUN_ERROR


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
    decisions: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOutcome:
    """A finished run: the engine result, its JSON document, exit code and located problems."""

    pipeline: CompiledPipeline
    result: RunResult
    document: RunResultDocument
    exit_code: int
    error: ConvergeError | None
    diagnostics: tuple[Diagnostic, ...] = ()


def load_document(path: Path) -> LoadedDocument:
    """Load and validate (the same diagnostics as `validate`); raises `PipelineInvalid`."""
    from converge_dsl import validation

    if not path.is_file():
        raise UsageError(f"no such pipeline file: {path}")
    loader = validation.load_pipeline
    document: LoadedDocument = loader(path)
    return document


def _cassette(path: Path, option: str) -> Model:
    """The replay model of a cassette named on the command line; a bad one is a `UsageError`."""
    from converge_dsl.models import ModelError, ReplayModel
    from converge_dsl.models.cassette import RECORD_HINT

    if path.is_dir():
        raise UsageError(
            f"{option}: {str(path)!r} is a folder, not a cassette file", hint=RECORD_HINT
        )
    if not path.exists():
        raise UsageError(f"{option}: no cassette file {str(path)!r}", hint=RECORD_HINT)
    try:
        return ReplayModel.from_file(path)
    except ModelError as exc:
        raise UsageError(
            f"{option}: {exc.message.removeprefix(f'{exc.code.value}: ')}", hint=exc.hint
        ) from None


def _same_file(a: Path, b: Path) -> bool:
    """True when `a` and `b` name one file (the same resolved path, or a hard link)."""
    with contextlib.suppress(OSError):
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _read_files(document: LoadedDocument, options: RunOptions) -> list[tuple[Path, str]]:
    """The files a run reads (never to be overwritten by an output): path and what it is."""
    base_dir = Path(document.file).parent
    found = [(options.pipeline, "the pipeline")]
    declared: Mapping[str, Any] = document.data.get("models") or {}
    for name, config in declared.items():
        for field_name in ("script", "cassette"):
            value = config.get(field_name) if isinstance(config, Mapping) else None
            if isinstance(value, str):
                found.append((base_dir / value, f"the {field_name} of model {name!r}"))
    found.extend(
        (Path(cassette), f"the cassette of --model {name}")
        for name, cassette in options.model_overrides.items()
    )
    if options.replay is not None:
        found.append((options.replay, "the --replay cassette"))
    if options.checkpoint is not None:
        found.append((options.checkpoint / CHECKPOINT_FILE, "the checkpoint file"))
    return found


def _check_cassette_target(path: Path) -> None:
    """`--record` appends only to an empty file or to a cassette (first line is a record)."""
    try:
        with path.open("rb") as handle:
            first = handle.readline(1 << 20)
    except FileNotFoundError:
        return
    except OSError:
        return  # a folder or an unreadable file: reported by the open below
    if not first.strip():
        return
    try:
        entry = json.loads(first)
        ok = isinstance(entry, dict) and "key" in entry and "request" in entry
    except (ValueError, RecursionError):
        ok = False
    if not ok:
        raise UsageError(
            f"--record {str(path)!r} exists and is not a cassette; it is not appended to",
            hint="give --record a new file, an empty one, or a cassette recorded before",
        )


def check_outputs(document: LoadedDocument, options: RunOptions) -> None:
    """Refuse unusable `--checkpoint` / `--record` / `--trace` paths before any work (`UsageError`).

    An output may not be a file the run reads (the pipeline, a model script or
    cassette, the checkpoint), nor the other output. `--record` appends only to
    an empty file or an existing cassette. (`--trace` is opened, and truncated,
    when the `TraceWriter` is made.)
    """
    if options.checkpoint is not None:
        resuming = options.checkpoint == options.resume
        check_folder(
            options.checkpoint, "--resume" if resuming else "--checkpoint", create=not resuming
        )
    outputs = [(p, o) for p, o in ((options.trace, "--trace"), (options.record, "--record")) if p]
    if len(outputs) == 2 and _same_file(outputs[0][0], outputs[1][0]):
        raise UsageError(
            f"--trace and --record name the same file {str(outputs[0][0])!r}",
            hint="give each its own file",
        )
    for path, option in outputs:
        for read, what in _read_files(document, options):
            if _same_file(path, read):
                raise UsageError(
                    f"{option} {str(path)!r} is {what}; it would be overwritten",
                    hint=f"give {option} a file of its own (e.g. run.jsonl)",
                )
    if options.record is not None:
        _check_cassette_target(options.record)
        if options.record.parent != Path():
            with contextlib.suppress(OSError):  # a missing parent: reported by the open below
                options.record.parent.mkdir(parents=True, exist_ok=True)
        open_output(options.record, "--record", "cassette", mode="a").close()


def build_models(
    document: LoadedDocument, options: RunOptions, attempt_gate: Callable[[], bool] | None = None
) -> dict[str, Model]:
    """Build every declared model.

    Provider retries and failovers are bounded by the run's budget: each asks
    `attempt_gate` (the run's usage meter) first, and none starts past the
    run's wall-clock deadline (`budget.max_wall_s` from now, on the run's clock).
    """
    from converge_dsl.models import RecordingModel, build_model

    declared: Mapping[str, Any] = document.data.get("models") or {}
    for name in options.model_overrides:
        if name not in declared:
            raise UsageError(
                f"--model {name}=...: the pipeline declares no model {name!r}",
                hint=f"declared models: {', '.join(sorted(declared)) or 'none'}",
            )
    base_dir = Path(document.file).parent
    max_wall_s = (document.data.get("budget") or {}).get("max_wall_s")
    deadline = None if max_wall_s is None else options.clock.monotonic() + float(max_wall_s)
    models: dict[str, Model] = {}
    for name, config in declared.items():
        override = options.model_overrides.get(name)
        model: Model
        if options.replay is not None:
            model = _cassette(options.replay, f"--replay {options.replay}")
        elif override is not None:
            model = _cassette(Path(override), f"--model {name}={override}")
        else:
            model = build_model(
                name,
                config,
                base_dir=base_dir,
                env=options.env,
                clock=options.clock,
                rng=random.Random(0),
                attempt_gate=attempt_gate,
                deadline=deadline,
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
        return self.target is None or bool(self.target.can_call())


def build_engine(
    compiled: CompiledPipeline, sink: Callable[[BaseModel], None], clock: Clock
) -> Any:
    """The engine for a compiled pipeline, its suggestors registered in order.

    A sink with a false `listening` attribute (a `TraceWriter` with no file and
    no listener) is not given to the engine, so no event objects are built.
    """
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
        events=sink if getattr(sink, "listening", True) else None,
        record_events=False,
    )
    for suggestor in compiled.suggestors:
        engine.register(suggestor)
    return engine


def run_error_diagnostic(error: ConvergeError, source_text: str | None = None) -> Diagnostic | None:
    """A located run error (template at cycle 7) as a diagnostic for the JSON output.

    With the pipeline's `source_text`, a span that names only a line (a line inside a
    block-scalar template) is narrowed to that line's text.
    """
    if not isinstance(error, RunError) or error.span is None:
        return None
    who = f" (suggestor {error.suggestor!r}, cycle {error.cycle})" if error.suggestor else ""
    span = error.span if source_text is None else _line_text_span(error.span, source_text)
    return Diagnostic.at(RUN_ERROR_CODE, f"{error.message}{who}", span, hint=error.hint)


def _line_text_span(span: SourceSpan, text: str) -> SourceSpan:
    if span.column != 1 or span.end_column != 1 or span.line != span.end_line:
        return span
    lines = text.splitlines()
    if not 0 < span.line <= len(lines):
        return span
    line = lines[span.line - 1]
    stripped = line.strip()
    if not stripped:
        return span
    start = len(line) - len(line.lstrip()) + 1
    return SourceSpan(span.file, span.line, start, span.line, start + len(stripped))


async def run_pipeline(options: RunOptions) -> RunOutcome:
    if options.decisions and options.resume is None:
        raise UsageError(
            "--approve/--reject/--decisions continue a paused run",
            hint="add --resume DIR (the --checkpoint folder of the paused run)",
        )
    document = load_document(options.pipeline)
    check_outputs(document, options)
    store_dir = options.checkpoint or options.resume
    with folder_lock(store_dir, "--resume" if options.resume else "--checkpoint"):
        return await _run_locked(document, options, store_dir)


async def _run_locked(
    document: LoadedDocument, options: RunOptions, store_dir: Path | None
) -> RunOutcome:
    usage = _UsageProxy()
    sink = TraceWriter({}, options.trace, options.listeners)
    models: dict[str, Model] = {}
    try:
        models = build_models(document, options, attempt_gate=usage.can_call)
        compiled = compile_pipeline(
            document, inputs=options.inputs, models=models, usage=usage, events=sink
        )
        sink.set_spans(compiled.spans)
        engine = build_engine(compiled, sink, options.clock)
        usage.target = engine.usage
        store = (
            None
            if store_dir is None
            else CheckpointStore(store_dir, pipeline_digest(document.text, dict(compiled.inputs)))
        )
        decided: Mapping[str, bool] = {}
        if options.resume is not None and store is not None:
            start = store.load()
            result, decided = await _continue(engine, store, start, options.decisions)
        else:
            result = await engine.run(
                compiled.seeds, on_cycle_end=None if store is None else store.save
            )
        if sink.failure is not None:  # swallowed inside a suggestor: still fatal
            raise sink.failure
        if store is not None and result.pause is not None:
            store.save(result.state)  # the pending proposals: enough to continue
    finally:
        sink.close()
        for model in models.values():
            await model.aclose()
    return outcome(compiled, result, decided, document.text)


async def _continue(
    engine: Any, store: CheckpointStore, start: EngineState, given: Mapping[str, bool]
) -> tuple[RunResult, Mapping[str, bool]]:
    """Resume from a checkpoint; a paused one goes on once every pending id is decided.

    Returns the result and the decisions still waiting (a run that stays paused).
    """
    if not start.pending:
        if given:
            raise UsageError(
                "the checkpoint holds no proposal awaiting a decision",
                hint="--approve/--reject apply to a run that stopped with hitl_pause (exit 6)",
            )
        result: RunResult = await engine.run(resume_from=start, on_cycle_end=store.save)
        return result, {}
    ids = [item.id for item in start.pending]
    for key in given:
        if key not in ids:
            close = did_you_mean(key, ids)
            raise UsageError(
                f"no pending proposal has id {key!r}",
                hint=f"did you mean {close!r}?" if close else f"pending: {', '.join(ids)}",
            )
    decisions = {**store.load_decisions(), **given}
    if any(item not in decisions for item in ids):
        store.save_decisions(decisions)
        # Nothing runs: the engine re-reports the pause from the checkpointed state.
        result = await engine.run(resume_from=start)
        return result, decisions
    store.clear_decisions()
    result = await engine.resume(
        HitlPause(start.pending, start), decisions, on_cycle_end=store.save
    )
    return result, {}


def outcome(
    compiled: CompiledPipeline,
    result: RunResult,
    decided: Mapping[str, bool] | None = None,
    source_text: str | None = None,
) -> RunOutcome:
    """The run-result document and exit code of `result` (`decided`: ids already decided)."""
    stop = str(result.stop_reason)
    diagnostics = []
    if result.error is not None:
        located = run_error_diagnostic(result.error, source_text)
        if located is not None:
            diagnostics.append(located)
    usage = result.usage
    pending = () if result.pause is None else result.pause.pending
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
        pending=tuple(item for item in pending if item.id not in (decided or {})),
        held=dict(decided or {}) if pending else {},
    )
    return RunOutcome(
        compiled, result, document, EXIT_BY_STOP.get(stop, 1), result.error, tuple(diagnostics)
    )
