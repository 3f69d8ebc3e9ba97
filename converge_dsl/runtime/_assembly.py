"""The one run assembly: settings -> meter -> models -> compile -> engine -> close.

`assemble_run(plan)` runs one loaded pipeline to a stop and returns its
`RunOutcome` (docs/architecture.md §12). Every way of running goes through
it: `converge-dsl run` (`_orchestrate.run_pipeline`), each case of a batch,
`converge-dsl test`, the pytest plugin and the Python API (all through
`converge_dsl.batch.Pipeline.outcome`). What differs between them is data in
the `RunPlan`: where the models come from, how the usage meter is made,
whether a compile cache or a checkpoint is used, and the run's `RunSink`s.

The order, once: the outputs are checked (one same-file check over the sinks,
then each sink's own), the checkpoint folder is locked and (`--resume`) read,
the inputs resolve into settings, the run's one `UsageMeter` is made before
anything that records into it (the models, with its attempt gate, each
behind the answer cache when the plan has one, then as the sinks wrap them; the
compiled suggestors; the engine), the sinks are opened and hear every event,
the engine runs, the sinks hear the outcome, and everything is closed
whatever happened (sinks, checkpoint store, models).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl._json_types import JsonObject
from converge_dsl.clock import Clock
from converge_dsl.compiler import RunParts, compile_pipeline, compile_settings
from converge_dsl.engine import Budget, Engine, ProposedFact, UsageMeter, freeze_alive
from converge_dsl.errors import ConvergeError

from ._answer_cache import AnswerCaching
from ._checkpoint import Checkpoint, CheckpointStore, pipeline_digest
from ._checkpoint_key import checkpoint_key
from ._engine import SUGGESTOR_KINDS, build_engine
from ._journal_media import FolderJournal, JournalMedium
from ._outcome import RunOutcome, outcome
from ._outputs import CheckpointSink, check_outputs
from ._resume import continue_run
from ._reuse import CompiledRuns
from ._sinks import RunSink
from ._suggestor_state import restore_states
from ._trace import TraceWriter, wall_clock
from ._traced_model import CallTracer

if TYPE_CHECKING:
    from converge_dsl.compiler import CompileCache, CompiledPipeline, PipelineSettings
    from converge_dsl.engine.state import RunResult
    from converge_dsl.frontend.document import LoadedDocument
    from converge_dsl.models.caching import AnswerCache
    from converge_dsl.models.port import Model
    from converge_dsl.tools import RunTools, ServerFactory

    from ._options import StopRequest

# The run's models from its settings and its meter's attempt gate.
ModelMaker = Callable[["PipelineSettings", Callable[[], bool]], dict[str, "Model"]]
# The run's usage meter from its budget (a batch's counts against the batch-wide cap).
MeterFactory = Callable[[Budget], UsageMeter]
# The budget of one run from its pipeline's (a service's request may lower it).
BudgetRule = Callable[[Budget], Budget]
# The compile cache of a run from its resolved inputs (None: compile afresh).
CacheOpener = Callable[[JsonObject], "CompileCache | None"]


@dataclass(frozen=True)
class Checkpointing:
    """A run journalled into `folder` (`--checkpoint`), or continued from it (`resume`).

    `journal` keeps the journal elsewhere than in a folder (`_journal_media`; a
    service's database, `SqliteJournals`): `folder` is then not used.
    """

    folder: Path
    resume: bool = False
    decisions: Mapping[str, bool] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    # Who gave each of `decisions` (id -> `cli`, `file:NAME`); an id left out is `api`.
    decided_by: Mapping[str, str] = field(default_factory=dict)
    journal: JournalMedium | None = None
    # The key sealing the journal when the caller read it already (a service reads it
    # once); None: `checkpoint_key(env)`, read when the run starts.
    key: bytes | None = None

    def medium(self) -> JournalMedium:
        """Where the journal is kept: `journal`, else the folder's files."""
        return self.journal if self.journal is not None else FolderJournal(self.folder)


@dataclass(frozen=True)
class RunPlan:
    """Everything one run is made of, once its pipeline is loaded (see the module docstring).

    `reads` are the files the run reads (no output may be one). `answers`: the
    answer cache the run's models are wrapped in (docs/cache.md). `freeze`: a
    process that runs this one pipeline moves what is alive once it is
    compiled to the collector's permanent generation (`RunOptions.freeze_compiled`).
    `tool_servers` makes the run's MCP tool servers (None: the real ones; a replay
    stands in for them under `--replay`, a batch worker lends its own). `environ` is
    the environment of the run its servers read (`env.pass`, header variables): the
    command line's, or the one given to `converge_dsl.load` (None: the process's).
    `stop` is bound to the engine while it runs (`StopRequest`).
    """

    document: LoadedDocument
    inputs: JsonObject
    clock: Clock
    models: ModelMaker
    sinks: tuple[RunSink, ...] = ()
    reads: Sequence[tuple[Path, str]] = ()
    meter: MeterFactory | None = None
    cache: CacheOpener | None = None
    checkpoint: Checkpointing | None = None
    freeze: bool = False
    reuse: CompiledRuns | None = None
    answers: AnswerCaching | None = None
    budget: BudgetRule | None = None
    tool_servers: ServerFactory | None = None
    environ: Mapping[str, str] | None = None
    stop: StopRequest | None = None

    def all_sinks(self) -> tuple[RunSink, ...]:
        """The checkpoint folder (an output too), then the plan's sinks in order."""
        if self.checkpoint is None or self.checkpoint.journal is not None:
            return self.sinks
        return (CheckpointSink(self.checkpoint.folder, self.checkpoint.resume), *self.sinks)


async def assemble_run(plan: RunPlan) -> RunOutcome:
    """Run `plan` to a stop (see the module docstring); raises the run's `ConvergeError`."""
    sinks = plan.all_sinks()
    check_outputs(sinks, plan.reads)
    if plan.checkpoint is None:
        return await _run(plan, sinks, None)
    medium = plan.checkpoint.medium()
    with medium.hold("--resume" if plan.checkpoint.resume else "--checkpoint"):
        return await _run(plan, sinks, medium)


async def _run(
    plan: RunPlan, sinks: tuple[RunSink, ...], medium: JournalMedium | None
) -> RunOutcome:
    models: dict[str, Model] = {}
    tools: RunTools | None = None
    store = _store(plan.checkpoint, medium)
    answers = None if plan.answers is None else plan.answers.open(plan.clock)
    try:
        checkpoint = _read_checkpoint(store, plan)
        inputs = plan.inputs or (checkpoint.inputs if checkpoint is not None else {})
        reuse = plan.reuse
        settings = (
            compile_settings(plan.document, inputs=inputs)
            if reuse is None
            else reuse.settings(plan.document, inputs)
        )
        budget = settings.budget if plan.budget is None else plan.budget(settings.budget)
        meter = (plan.meter or (lambda b: UsageMeter(b, clock=plan.clock)))(budget)
        for sink in sinks:
            sink.open(plan.clock)
        listeners = tuple(s.on_event for s in sinks if s.listens)
        # The time of day is only read for an event someone hears (not in most batch cases).
        wall = wall_clock(plan.clock) if listeners else None
        hub = TraceWriter({}, None, listeners, wall=wall)
        models = _wrapped(_cached(plan, answers, settings, meter), sinks, hub, plan.clock)
        tools = _tools(settings, hub, plan, sinks, meter, answers=answers)
        parts = RunParts(models=models, usage=meter, events=hub, tools=tools)
        compiled = None if reuse is None else reuse.compiled(inputs, parts)
        if compiled is None:
            cache = None if plan.cache is None else plan.cache(settings.inputs)
            with contextlib.nullcontext() if cache is None else cache.session():
                compiled = compile_pipeline(
                    settings,
                    models=models,
                    usage=meter,
                    events=hub,
                    kinds=SUGGESTOR_KINDS,
                    tools=tools,
                )
            if reuse is not None:
                reuse.offer(inputs, compiled)
        if plan.freeze:
            freeze_alive()  # see `RunOptions.freeze_compiled`
        for sink in sinks:
            sink.on_compiled(compiled, {plan.document.file: plan.document.text})
        engine = build_engine(compiled, hub, plan.clock, meter, budget=budget)
        if store is not None:
            _open_store(store, checkpoint, compiled, plan)
        # Nothing awaits between here and the engine's start: no request is missed.
        with contextlib.nullcontext() if plan.stop is None else plan.stop.bound(engine.cancel):
            result, decided = await _execute(engine, compiled.seeds, store, checkpoint, plan)
        _raise_failure(sinks)  # a write that failed inside a suggestor: still fatal
        if store is not None and result.pause is not None:
            store.save(result.state)  # the pending proposals: enough to continue
        if store is not None:
            store.close()  # every record on disk before the run reports
        out = outcome(compiled, result, decided, answers)
        for sink in sinks:
            sink.on_result(out)
        _raise_failure(sinks)
    finally:
        if store is not None:
            with contextlib.suppress(ConvergeError):  # already failing: keep that error
                store.close()
        for sink in sinks:
            sink.close()  # also one never opened: it may hold what it was made with
        await _release(models, tools)
    return out


def _open_store(
    store: CheckpointStore,
    checkpoint: Checkpoint | None,
    compiled: CompiledPipeline,
    plan: RunPlan,
) -> None:
    """Resume the checkpoint (its digest checked, the suggestors' states restored) or
    start a new one."""
    digest = pipeline_digest(plan.document.text, dict(compiled.inputs))
    if checkpoint is not None:
        checkpoint.check_digest(digest)
        restore_states(compiled.suggestors, checkpoint.suggestors)
        store.resume(checkpoint, compiled.suggestors)
    else:
        store.start(
            pipeline_text=plan.document.text,
            digest=digest,
            inputs=plan.inputs,
            suggestors=compiled.suggestors,
        )


async def _release(models: Mapping[str, Model], tools: RunTools | None) -> None:
    for model in models.values():
        await model.aclose()
    if tools is not None:
        await asyncio.to_thread(tools.close)  # every server, its process group too


def _tools(
    settings: PipelineSettings,
    hub: TraceWriter,
    plan: RunPlan,
    sinks: Sequence[RunSink],
    meter: UsageMeter,
    *,
    answers: AnswerCache | None,
) -> RunTools | None:
    """The run's MCP tool servers (started on first use, made by the plan's factory as
    each sink wraps it, no call past the run's deadline), or None when it declares none;
    the servers of its packs that it trusts (`PACK/SERVER`, each in its pack's folder)
    too; held to the lock when it pins them, behind the answer cache when the run has one."""
    manifest = settings.manifest
    if not manifest.tools and not manifest.trust:
        return None
    from converge_dsl.packs import lock_hint, locked_tool_servers, trusted_pack_servers
    from converge_dsl.tools import RunTools, real_server
    from converge_dsl.tools.caching import caching_tools

    pipeline = settings.base_dir / Path(manifest.file).name
    packed = trusted_pack_servers(pipeline, manifest, environ=plan.environ)  # `trust:` only
    if not manifest.tools and not packed:
        return None
    relock = lock_hint(Path(manifest.file))

    factory = plan.tool_servers or real_server
    for sink in sinks:
        factory = sink.tool_servers(factory)
    return RunTools(
        {**manifest.tools, **{name: found.spec for name, found in packed.items()}},
        settings.base_dir,
        environ=plan.environ,
        folders={name: found.folder for name, found in packed.items()},
        max_calls=settings.budget.max_tool_calls,
        events=hub if hub.listening else None,
        locked=locked_tool_servers(pipeline),
        relock=relock,
        wrap=None
        if answers is None
        else caching_tools(answers, relock, {name: found.pin for name, found in packed.items()}),
        on_refused=meter.refuse_tool_call,
        on_called=meter.count_tool_call,
        factory=factory,
        clock=plan.clock,
        deadline=lambda: meter.deadline,
    )


def _cached(
    plan: RunPlan, answers: AnswerCache | None, settings: PipelineSettings, meter: UsageMeter
) -> dict[str, Model]:
    """The run's models, each behind the run's answer cache when it has one."""
    built = plan.models(settings, meter.allow_attempt)
    if answers is None:
        return built
    meter.answers_from_cache()  # a reached budget stops the run only when a call is refused
    return {name: answers.wrap(name, model) for name, model in built.items()}


def _raise_failure(sinks: Sequence[RunSink]) -> None:
    for sink in sinks:
        if sink.failure is not None:
            raise sink.failure


def _wrapped(
    models: dict[str, Model], sinks: Sequence[RunSink], hub: TraceWriter, clock: Clock
) -> dict[str, Model]:
    """The run's models, as each sink wraps them, then traced when events go somewhere."""
    for sink in sinks:
        models = {name: sink.model(name, model) for name, model in models.items()}
    if not hub.listening:
        return models
    exchanges = next((s.exchange for s in sinks if s.exchange is not None), None)
    tracer = CallTracer(hub, clock, exchanges)
    return {name: tracer.wrap(name, model) for name, model in models.items()}


def _store(
    checkpointing: Checkpointing | None, medium: JournalMedium | None
) -> CheckpointStore | None:
    if checkpointing is None or medium is None:
        return None
    key = checkpointing.key if checkpointing.key is not None else checkpoint_key(checkpointing.env)
    return CheckpointStore(checkpointing.folder, key, medium=medium)


def _read_checkpoint(store: CheckpointStore | None, plan: RunPlan) -> Checkpoint | None:
    """With `--resume`: the verified checkpoint, refused if made from another pipeline text."""
    if store is None or plan.checkpoint is None or not plan.checkpoint.resume:
        return None
    checkpoint = store.read()
    checkpoint.check_pipeline(plan.document.text)
    return checkpoint


async def _execute(
    engine: Engine,
    seeds: tuple[ProposedFact, ...],
    store: CheckpointStore | None,
    checkpoint: Checkpoint | None,
    plan: RunPlan,
) -> tuple[RunResult, Mapping[str, bool]]:
    """A fresh run from the seeds, or (with `--resume`) the continuation of a checkpoint.

    A checkpoint taken before any cycle finished holds no state: it starts afresh.
    """
    if store is not None and checkpoint is not None and plan.checkpoint is not None:
        return await continue_run(
            engine,
            store,
            checkpoint,
            seeds,
            plan.checkpoint.decisions,
            given_by=plan.checkpoint.decided_by,
        )
    result = await engine.run(seeds, on_cycle_end=None if store is None else store.save)
    return result, {}
