"""`run_pipeline(options)`: `converge-dsl run` as a `RunPlan` for the one run assembly.

`run_pipeline(options)` is the entry point of a single run (`converge-dsl run`
is a thin shell over it). It loads and validates the pipeline, turns the
options into a `RunPlan` (models built from the declarations or answered by
cassettes, MCP tool servers answered by the `--replay` cassette too, the
compile cache, the checkpoint, the sinks of `options.sinks` plus OpenTelemetry
when asked for) and hands it to `_assembly.assemble_run`, which does the rest
in the one order every run follows. It returns a `RunOutcome` or raises a
`ConvergeError` (`PipelineInvalid` exit 2, `UsageError` exit 3, ...).

Human in the loop: a run that stops with `hitl_pause` checkpoints its pending
proposals (with `checkpoint`). `resume` + `decisions` (id -> approve) continues
it once every pending id is decided (see `_resume`). A fresh run with
`checkpoint` starts a journal holding the inputs as given; `resume` reads and
verifies it first and takes its inputs when none are given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl.compiler import LOCK_FILE, CompileCache, declare_models, open_cache
from converge_dsl.diagnostics import Diagnostic
from converge_dsl.engine import freeze_alive
from converge_dsl.errors import UsageError
from converge_dsl.frontend.document import LoadedDocument

from ._assembly import Checkpointing, RunPlan, assemble_run
from ._checkpoint_key import checkpoint_key
from ._models import build_models, tool_replay
from ._options import RunOptions
from ._outcome import RunOutcome
from ._outputs import read_files
from ._telemetry import OtelSink

if TYPE_CHECKING:
    from converge_dsl.models import ReplayOrder


def load_document(
    path: Path,
    on_fetch: Callable[[str], object] | None = None,
    roots: Sequence[Path] | None = None,
    on_warning: Callable[[Diagnostic], object] | None = None,
    text: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> LoadedDocument:
    """Load and validate (the same diagnostics as `validate`); raises `PipelineInvalid`.
    With `text`, that is the file's text (an editor's, not yet saved); `env`, the
    environment the checks read (default: the process's).

    Locked packs the cache lacks are fetched first; `on_fetch` hears one line for each.
    Files the pipeline names must lie in its folder or one of `roots`. `on_warning`
    hears each warning `validate` would show (a yanked pin, a key never read...).
    """
    from converge_dsl import validation

    if text is None and not path.exists():  # a FIFO or device too: refused (CD930)
        raise UsageError(f"no such pipeline file: {path}", code=codes.PATH_NOT_FOUND)
    return validation.load_pipeline(
        path,
        fetch=True,
        on_fetch=on_fetch,
        roots=roots,
        on_warning=on_warning,
        text=text,
        env=env,
    )


async def run_pipeline(options: RunOptions) -> RunOutcome:
    """Run the pipeline of `options` to a stop (see the module docstring)."""
    if options.decisions and options.resume is None:
        raise UsageError(
            "--approve/--reject/--decisions continue a paused run",
            hint="add --resume DIR (the --checkpoint folder of the paused run)",
            code=codes.ARGUMENTS_REFUSED,
        )
    # `--otel` without the SDK: refused before any work.
    otel = OtelSink.start(options.otel, options.env, options.clock, _replayed(options))
    try:
        document = load_document(
            options.pipeline, options.on_fetch, options.roots, options.on_warning, env=options.env
        )
        if options.freeze_compiled:
            freeze_alive()  # see `RunOptions.freeze_compiled`
        store_dir = options.checkpoint or options.resume
        orders: dict[str, ReplayOrder] = {}  # a cassette's order, its models' and tools'
        plan = RunPlan(
            document=document,
            inputs=options.inputs,
            clock=options.clock,
            models=lambda settings, gate: build_models(
                settings, options, attempt_gate=gate, orders=orders
            ),
            sinks=(*options.sinks, *(() if otel is None else (otel,))),
            reads=read_files(declare_models(document), options),
            cache=(lambda inputs: _compile_cache(document, inputs, options))
            if options.compile_cache
            else None,
            checkpoint=None
            if store_dir is None
            else Checkpointing(
                store_dir,
                options.resume is not None,
                options.decisions,
                options.env,
                options.decided_by,
            ),
            freeze=options.freeze_compiled,
            answers=options.answers,
            tool_servers=tool_replay(options.replay, orders)
            if options.replay is not None and _declares_tools(document)
            else None,
            stop=options.stop,
            environ=options.env,
        )
        return await assemble_run(plan)
    finally:
        if otel is not None:
            otel.close()


def _declares_tools(document: LoadedDocument) -> bool:
    """Whether the pipeline declares MCP tool servers, or trusts some of its packs' (a
    replay then answers them too)."""
    from converge_dsl.frontend import build_manifest

    manifest = build_manifest(document)
    return bool(manifest.tools or manifest.trust)


def _replayed(options: RunOptions) -> Callable[[str], bool]:
    """Whether a cassette answers model `name` (`--replay`, `--model NAME=CASSETTE`)."""
    return lambda name: options.replay is not None or name in options.model_overrides


def _compile_cache(
    document: LoadedDocument, inputs: JsonObject, options: RunOptions
) -> CompileCache | None:
    """The pipeline's on-disk compile cache (`compiler.open_cache`)."""
    return open_cache(
        options.env,
        document.text,
        inputs,
        options.pipeline.parent / LOCK_FILE,  # `packs.lock_path`, without importing packs
        lambda: checkpoint_key(options.env),
    )
