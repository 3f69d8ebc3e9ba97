"""`load(path) -> Pipeline`: load, validate and check a pipeline once; run it many times.

What `converge_dsl.runtime.run_pipeline` does per run is split in two. Once,
in `load`: read the YAML, validate it (the diagnostics of `validate`; a
locked pack the cache lacks is fetched), and check the files it names. Per
run: the runtime's one run assembly (`converge_dsl.runtime.assemble_run`,
docs/architecture.md §12) with this pipeline's models (sharing each HTTP
model's connection pool, `_shared`), its MCP tool servers (started once, lent to
every run: `converge_dsl.tools.ServerPool`), the caller's meter and the run's sinks.

A `Pipeline` is immutable: runs share nothing they could change (each has
its own meter, models, compiled suggestors and engine), so any number may
run at once, on one event loop or on several threads. It pickles as what
`load` checked (the document, environment, roots, clock, and the locked packs
its validation read): a worker process gets it without loading, validating
or reading its packs again, with its own pools and compile cache.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from converge_dsl import codes
from converge_dsl.clock import Clock, SystemClock
from converge_dsl.errors import UsageError

from ._shared import SharedTransports

if TYPE_CHECKING:
    from converge_dsl._json_types import JsonSchema
    from converge_dsl.compiler import PipelineSettings
    from converge_dsl.engine import Budget
    from converge_dsl.frontend import InputSpec
    from converge_dsl.frontend.document import LoadedDocument
    from converge_dsl.models import Model
    from converge_dsl.packs import Pack
    from converge_dsl.runtime import (
        CacheSettings,
        Checkpointing,
        RunOutcome,
        RunResultDocument,
        RunSink,
    )
    from converge_dsl.tools import ServerFactory

    from ._cases import ModelOverride
    from ._schedule import MeterFactory

T = TypeVar("T")
_HTTP_ADAPTERS = frozenset({"openai", "anthropic"})


class Pipeline:
    """A loaded, validated pipeline, ready to run many times (see the module docstring).

    `run(inputs)` and `await arun(inputs)` return the run result
    (`RunResultDocument`, the `run-result.v1` model) of one run; a run that
    stops on a budget, an invariant or a model failure is a result, not an
    exception. Inputs the pipeline does not declare (or a missing required
    one) raise `UsageError`; any other problem raises its `ConvergeError`.
    `run_many(cases, concurrency=N)` yields one result per case, in the order
    of `cases` (a case that cannot run yields its `usage_error`/`error`
    result; an input the cases give that the pipeline does not declare raises
    `CasesRefused` before any case runs). Close with `close()` / `await aclose()`
    (or a `with` block) to release the shared connection pools.
    """

    __slots__ = (
        "_answers",
        "_cache",
        "_clock",
        "_compiled",
        "_document",
        "_env",
        "_files",
        "_manifest",
        "_max_connections",
        "_path",
        "_roots",
        "_tools",
        "_transports",
    )

    def __init__(
        self,
        path: Path,
        document: LoadedDocument,
        *,
        env: Mapping[str, str],
        clock: Clock,
        roots: tuple[Path, ...],
        max_connections: int,
        cache: CacheSettings | None = None,
    ) -> None:
        from converge_dsl.frontend import build_manifest

        self._path = path
        self._document = document
        self._manifest = build_manifest(document)  # once: every run's settings read it
        self._env = dict(env)
        self._clock = clock
        self._roots = roots
        self._files: dict[tuple[object, ...], Path] = {}  # model files, resolved once
        self._max_connections = max_connections
        self._transports = SharedTransports(max_connections, self._env)
        from converge_dsl.tools import ServerPool

        self._tools = ServerPool()  # stdio and HTTP tool servers: started once for every run
        from converge_dsl.runtime import CompiledRuns

        self._compiled = CompiledRuns()  # compile once, run many (see `CompiledRuns`)
        from converge_dsl.runtime import cache_settings

        # The answer cache as `cache` says, else as the environment does (docs/cache.md);
        # a worker process (or Ray actor) opens its own connection to the same store.
        self._cache = cache or cache_settings(env=self._env)
        self._answers = self._cache.caching(_warn)

    def __repr__(self) -> str:
        return f"Pipeline(name={self.name!r}, path={str(self._path)!r})"

    def with_cache(self, cache: CacheSettings) -> Pipeline:
        """This pipeline, its runs' model calls cached as `cache` says (`--cache`,
        `--offline`: `converge_dsl.runtime.cache_settings`); a worker's copy too."""
        return Pipeline(
            self._path,
            self._document,
            env=self._env,
            clock=self._clock,
            roots=self._roots,
            max_connections=self._max_connections,
            cache=cache,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        from converge_dsl.packs import handed_packs
        from converge_dsl.sandbox import meta_valid_texts

        arguments = (self._path, self._document, self._env, self._clock, self._roots)
        # The key schemas this process found valid: a worker does not check them again;
        # and the locked packs its validation read: a worker does not read them again.
        checked = meta_valid_texts(self.key_schemas.values())
        packs = handed_packs(self._document) if self._manifest.packs else None
        return (_unpickled, (*arguments, self._max_connections, self._cache, checked, packs))

    @property
    def name(self) -> str:
        return self._manifest.name

    @property
    def path(self) -> Path:
        return self._path

    @property
    def inputs(self) -> Mapping[str, Any]:
        """The declared inputs (name -> declaration), as the pipeline writes them."""
        return dict(self._document.data.get("inputs") or {})

    @property
    def cache(self) -> CacheSettings:
        """Where and how the runs' model calls are cached (mode `off`: not at all)."""
        return self._cache

    @property
    def env(self) -> Mapping[str, str]:
        """The environment the pipeline's models (and its checkpoint key) are read from."""
        return dict(self._env)

    @property
    def declared_inputs(self) -> Mapping[str, InputSpec]:
        """The typed `inputs:` declarations (name -> `InputSpec`: required, default, where)."""
        return self._manifest.inputs

    @property
    def key_schemas(self) -> Mapping[str, JsonSchema]:
        """The declared keys' `schema`s by key name (keys without one are left out)."""
        from converge_dsl.compiler import key_schemas

        return key_schemas(self._manifest)

    @property
    def budget(self) -> Budget:
        """The budget of one run, as `budget:` writes it (the engine's defaults elsewhere)."""
        from converge_dsl.compiler import budget_of

        return budget_of(self._manifest.budget)

    @property
    def document(self) -> LoadedDocument:
        """The loaded, validated document (its text, file, and source map)."""
        return self._document

    @property
    def keys(self) -> tuple[str, ...]:
        """The context keys a run may hold: the built-in ones, then the declared ones."""
        from converge_dsl.keys import BUILTIN_KEYS

        return BUILTIN_KEYS + tuple(k.name for k in self._manifest.keys)

    @property
    def models(self) -> tuple[str, ...]:
        """The names of the declared models (`run(..., models=...)` may replace them)."""
        return tuple(self._manifest.models)

    @property
    def tool_servers(self) -> tuple[str, ...]:
        """The names of the MCP tool servers it declares (`tools:`), in order, then those of
        its packs it trusts (`PACK/SERVER`)."""
        trusted = [f"{pack}/{s}" for pack, servers in self._manifest.trust.items() for s in servers]
        return (*self._manifest.tools, *trusted)

    @property
    def invariants(self) -> tuple[str, ...]:
        """The names of the declared invariants."""
        return tuple(i.name for i in self._manifest.invariants)

    # --- running -----------------------------------------------------------

    def run(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        models: Mapping[str, Model] | None = None,
    ) -> RunResultDocument:
        """Run once to a stop and return the run result (blocks; see `arun`)."""
        return _sync(lambda: self._run_and_close(inputs, models))

    async def arun(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        models: Mapping[str, Model] | None = None,
    ) -> RunResultDocument:
        """Run once to a stop on the running event loop and return the run result.

        `models` replaces the pipeline's models of those names for this run (a
        scripted model in a test, say); each must be a fresh instance, closed
        when the run ends. A name the pipeline does not declare is a `UsageError`.
        """
        return (await self.outcome(inputs, models=models)).document

    def run_many(
        self, cases: Iterable[Mapping[str, Any]], *, concurrency: int = 16
    ) -> Iterator[RunResultDocument]:
        """Run every case (an inputs mapping), `concurrency` at a time on one event loop;
        yield the results in the order of `cases`, each as soon as it and those before it
        are done. Not from inside a running event loop: use `arun_many` there.

        `cases` are read in full first: an input one gives that the pipeline does not
        declare raises `CasesRefused` (a `PipelineInvalid`, CD802: each such input once,
        naming the first case giving it, `#INDEX (no id)` or its `id`) from the first
        `next`, before any case runs, as `run --cases` refuses it."""
        from ._schedule import drive

        _new_loop().close()  # refused inside a running loop, before anything starts
        yield from drive(self, self.arun_many(cases, concurrency=concurrency))

    async def arun_many(
        self, cases: Iterable[Mapping[str, Any]], *, concurrency: int = 16
    ) -> AsyncIterator[RunResultDocument]:
        """`run_many` on the running event loop (`CasesRefused` from the first step)."""
        from ._cases import cases_of
        from ._schedule import ordered
        from ._undeclared import check_cases

        given = list(cases_of(enumerate(cases)))
        check_cases(self.name, self.inputs, given)
        async for _, out in ordered(self, given, concurrency=concurrency):
            yield out.document

    async def outcome(
        self,
        inputs: Mapping[str, Any] | None = None,
        *,
        meter: MeterFactory | None = None,
        models: Mapping[str, Model] | None = None,
        sinks: Sequence[RunSink] = (),
        checkpoint: Checkpointing | None = None,
        budget: Callable[[Budget], Budget] | None = None,
        tool_servers: ServerFactory | None = None,
        overrides: Mapping[str, ModelOverride] | None = None,
        replay: Path | None = None,
    ) -> RunOutcome:
        """One run's `RunOutcome` (document, exit code, located diagnostics).

        `meter` makes the run's usage meter from its budget (default: a plain
        `UsageMeter` on the pipeline's clock); a batch passes one that also counts
        against the batch-wide cap. `models` replaces models by name (see `arun`).
        `sinks` are the run's outputs (`converge_dsl.runtime.RunSink`: a trace, a
        report, OpenTelemetry; a batch makes them per case). `checkpoint` journals the
        run into a folder, or continues it from there with decisions on a pause
        (`converge_dsl.runtime.Checkpointing`, what `--checkpoint`/`--resume` make; the
        service keeps one per run). `budget` makes the run's budget from the
        pipeline's (a service's request lowers it). `tool_servers` makes the run's MCP
        tool servers (a test's cassettes); by default they are lent by the pipeline's
        pool, started once for all its runs and stopped by `close`/`aclose`.
        `overrides` declares models anew for this run by name (`ModelOverride`: an
        evaluation's configuration), built as declared ones are; a name the pipeline
        does not declare is a `UsageError`. `replay` answers every model and tool server
        of the run from that cassette, as `run --replay` does (a batch case's own).
        """
        from converge_dsl.runtime import RunPlan, assemble_run

        from ._cases import named_inputs

        given = dict(models or {})
        orders: dict[str, Any] = {}  # the replay's answer order, its models' and tools'

        def build(settings: PipelineSettings, gate: Callable[[], bool]) -> dict[str, Model]:
            _check_model_names(given, settings.models)
            if overrides:
                _check_model_names(overrides, settings.models)
                settings = _overridden(settings, overrides)
            if replay is not None:
                from converge_dsl.runtime import replayed_models

                option = f"--replay {replay}"
                return replayed_models(
                    settings, replay, option, clock=self._clock, attempt_gate=gate, orders=orders
                )
            return self._models(settings, gate, given)

        if tool_servers is None and replay is not None and self._manifest.tools:
            from converge_dsl.runtime import tool_replay

            tool_servers = tool_replay(replay, orders)

        plan = RunPlan(
            document=self._document,
            inputs=named_inputs(inputs or {}, "inputs"),
            clock=self._clock,
            models=build,
            sinks=tuple(sinks),
            meter=meter,
            reuse=self._compiled,
            answers=self._answers,
            checkpoint=checkpoint,
            budget=budget,
            tool_servers=tool_servers or self._tools.lend,
            environ=self._env,
        )
        return await assemble_run(plan)

    def _models(
        self, settings: PipelineSettings, gate: Callable[[], bool], given: Mapping[str, Model]
    ) -> dict[str, Model]:
        """The run's models: `given` ones as they are, the others built per run, HTTP
        ones over the shared connection pools."""
        from converge_dsl.runtime import model_builder

        build = model_builder(
            settings,
            env=self._env,
            clock=self._clock,
            roots=self._roots,
            attempt_gate=gate,
            resolved=self._files,
        )
        models: dict[str, Model] = {}
        for name, declaration in settings.models.items():
            if name in given:
                models[name] = given[name]
                continue
            shared = declaration.spec.adapter in _HTTP_ADAPTERS
            models[name] = build(name, self._transports.lend(name) if shared else None)
        return models

    # --- closing -----------------------------------------------------------

    async def _run_and_close(
        self, inputs: Mapping[str, Any] | None, models: Mapping[str, Model] | None
    ) -> RunResultDocument:
        try:
            return await self.arun(inputs, models=models)
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pools of the running loop and stop the tool servers (runs
        after this make new ones)."""
        await self._transports.aclose()
        await asyncio.to_thread(self._tools.close)

    def close(self) -> None:
        """Stop the tool servers (`run` and `run_many` close their loop's connection pools)."""
        self._tools.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Pipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def close_answers(pipeline: Pipeline) -> None:
    """Close `pipeline`'s connection to its answer cache (when it has one), in a process
    that keeps the loaded pipeline only to hand it to its workers, each with its own
    connection (`_process`: it forks them only with no database open)."""
    if pipeline._answers is not None:
        pipeline._answers.store.close()


def _unpickled(  # noqa: PLR0917 (pickle passes the arguments by position)
    path: Path,
    document: LoadedDocument,
    env: Mapping[str, str],
    clock: Clock,
    roots: tuple[Path, ...],
    max_connections: int,
    cache: CacheSettings,
    checked: tuple[str, ...] = (),
    packs: tuple[bytes | None, Mapping[str, Pack]] | None = None,
) -> Pipeline:
    from converge_dsl.sandbox import remember_meta_valid

    remember_meta_valid(checked)
    if packs is not None:
        from converge_dsl.packs import keep_packs

        keep_packs(document, *packs)
    return Pipeline(
        path,
        document,
        env=env,
        clock=clock,
        roots=roots,
        max_connections=max_connections,
        cache=cache,
    )


def _overridden(
    settings: PipelineSettings, overrides: Mapping[str, ModelOverride]
) -> PipelineSettings:
    """`settings` whose models of the overrides' names are declared as they say."""
    from dataclasses import replace

    from converge_dsl.compiler import ModelDeclaration
    from converge_dsl.models.factory import checked_spec

    models = dict(settings.models)
    for name, override in overrides.items():
        spec = checked_spec(name, override.spec)
        files = {field: override.base_dir / value for field, value in spec.files.items()}
        models[name] = ModelDeclaration(name, spec, files, override.base_dir)
    return replace(settings, models=models)


def _check_model_names(given: Mapping[str, object], declared: Mapping[str, object]) -> None:
    """`UsageError` for a replacement model the pipeline does not declare."""
    for name in given:
        if name not in declared:
            from converge_dsl.diagnostics import unknown_name_hint

            listed = f"declared: {', '.join(declared) or 'none'}"
            raise UsageError(
                f"the pipeline declares no model {name!r}",
                hint=unknown_name_hint(name, declared, listed),
                code=codes.INPUT_REFUSED,
            )


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.new_event_loop()
    raise UsageError(
        "Pipeline.run and run_many cannot be called from a running event loop",
        hint="use `await pipeline.arun(...)` or `async for r in pipeline.arun_many(...)`",
        code=codes.API_MISUSE,
    )


def _sync(coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine `coroutine()` makes to its end on a new event loop, closed as
    `asyncio.run` closes its own: what is still scheduled runs first (a model's
    connections closed at the run's end close their sockets so), and Ctrl-C cancels the
    run before it is raised (`UsageError` inside a running loop, before the coroutine is
    made)."""
    loop = _new_loop()
    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(coroutine())


def _warn(line: str) -> None:
    """A warning of the answer cache (a cached answer that failed its check), on stderr."""
    import sys

    sys.stderr.write(line + "\n")


def load(
    path: str | os.PathLike[str],
    *,
    env: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    allow_roots: Iterable[str | os.PathLike[str]] = (),
    on_fetch: Callable[[str], object] | None = None,
    max_connections: int = 64,
    cache: CacheSettings | None = None,
    text: str | None = None,
) -> Pipeline:
    """Load, validate and check the pipeline at `path` once; return it ready to run.

    Raises what `converge-dsl run` would report before running: `PipelineInvalid`
    (its `diagnostics` are those of `validate`), `UsageError` (no such file),
    `PackError`. `env` is the environment models read their keys from (default:
    the process's); `clock` the injected clock; `allow_roots` folders besides the
    pipeline's own where files it names may lie (`CONVERGE_DSL_ALLOW_ROOTS` in
    `env` adds more); `on_fetch` hears a line per pack fetched into the cache;
    `max_connections` bounds each HTTP model's shared connection pool; `cache` says
    where and how the runs' model calls are cached (`converge_dsl.runtime.cache_settings`;
    default: as `CONVERGE_DSL_CACHE_MODE` and `CONVERGE_DSL_CACHE` of `env` say); `text`,
    when given, is the file's text (an editor's, not yet saved).
    """
    from converge_dsl._files import user_roots
    from converge_dsl.runtime import load_document

    environment = dict(os.environ if env is None else env)
    roots = user_roots(tuple(Path(p) for p in allow_roots), environment)
    file = Path(path)
    document = load_document(file, on_fetch, roots, text=text, env=environment)
    return Pipeline(
        file,
        document,
        env=environment,
        clock=clock or SystemClock(),
        roots=roots,
        max_connections=max_connections,
        cache=cache,
    )
