"""`RunOptions`: what makes a run of `converge-dsl run`, as the runtime receives it.

Where the run's results go is not an option each: it is the list of `sinks`
(`_sinks.RunSink`: `--trace`, `--report`, `--record`, the live progress, the
result document), checked and driven by the one run assembly (`_assembly`).

`StopRequest` asks a run from outside (the command line's first Ctrl-C) to stop
as soon as it can with stop reason `cancelled`: the engine's `cancel`, so the
run ends as any other does (its facts so far, its trace, its checkpoint, its
result). The run assembly binds it to its engine while the engine runs; `ask()`
says whether a running engine heard it (False while the pipeline loads or once
the engine stopped: nothing can stop gracefully then).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl._json_types import JsonObject
from converge_dsl.clock import Clock, SystemClock

if TYPE_CHECKING:
    from converge_dsl.diagnostics import Diagnostic

    from ._answer_cache import AnswerCaching
    from ._sinks import RunSink


class StopRequest:
    """A request that a run stop with `cancelled` (see the module docstring). Ask it on
    the run's event loop: a signal handler the loop runs (`loop.add_signal_handler`),
    or `loop.call_soon_threadsafe(stop.ask)` from another thread."""

    def __init__(self) -> None:
        self._cancel: Callable[[], None] | None = None
        self.asked = False  # a running engine heard it

    @contextlib.contextmanager
    def bound(self, cancel: Callable[[], None]) -> Iterator[None]:
        """Stop through `cancel` (an engine's) while the block runs."""
        self._cancel = cancel
        try:
            yield
        finally:
            self._cancel = None

    def ask(self) -> bool:
        """Ask the running engine to stop; False when none runs."""
        if self._cancel is None:
            return False
        self.asked = True
        self._cancel()
        return True


@dataclass(frozen=True)
class OtelOptions:
    """OpenTelemetry export (`converge_dsl.runtime._telemetry`).

    `flag` (`--otel`) turns it on (so does an OTEL_* variable of the run's
    environment naming an exporter); `content` (`--otel-content`) records
    prompts and answers (redacted); `exporter` (an SDK `SpanExporter`) replaces
    the configured exporter (tests, embedding applications). `on_warning` hears
    each warning line (export failures); None writes them to standard error.
    """

    flag: bool = False
    content: bool = False
    exporter: Any = None
    on_warning: Callable[[str], object] | None = None


@dataclass(frozen=True)
class RunOptions:
    """What makes one run of `converge-dsl run`. Paths are as the user gave them.

    `allow_roots` are the folders (`--allow-root DIR`) where files the pipeline
    names may lie besides its own folder; those of `CONVERGE_DSL_ALLOW_ROOTS`
    in `env` are added (`roots`). `checkpoint`/`resume`/`decisions` journal a
    run and continue it (the checkpoint is read as well as written, so it is
    not only a sink). `sinks` are the run's outputs, in the order they hear it.
    """

    pipeline: Path
    inputs: JsonObject = field(default_factory=dict)
    model_overrides: Mapping[str, str] = field(default_factory=dict)
    replay: Path | None = None
    checkpoint: Path | None = None
    resume: Path | None = None
    decisions: Mapping[str, bool] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=SystemClock)
    # Who gave each of `decisions` (id -> `cli`, `file:NAME`); an id left out is `api`.
    decided_by: Mapping[str, str] = field(default_factory=dict)
    # Hears `fetched pack NAME VERSION from REPOSITORY` for each pack fetched into the cache.
    on_fetch: Callable[[str], object] | None = None
    # Hears each warning of the pipeline's validation (what `validate` shows), before the run.
    on_warning: Callable[[Diagnostic], object] | None = None
    allow_roots: tuple[Path, ...] = ()
    # Use the on-disk compile cache (`--no-cache` turns it off; so does CONVERGE_DSL_NO_CACHE=1).
    compile_cache: bool = True
    # A process that runs this one pipeline (the command line): once it is loaded and
    # once it is compiled, every live object goes to the collector's permanent
    # generation (`gc.freeze`), so collections during the run skip them.
    freeze_compiled: bool = False
    otel: OtelOptions = field(default_factory=OtelOptions)
    # The answer cache of the run's model calls (`--cache`, `--offline`; docs/cache.md).
    answers: AnswerCaching | None = None
    sinks: tuple[RunSink, ...] = ()
    # Stops the run with `cancelled` when asked (the command line's first Ctrl-C).
    stop: StopRequest | None = None

    @property
    def roots(self) -> tuple[Path, ...]:
        """Every allowed root besides the pipeline's folder, resolved (`--allow-root`, env)."""
        from converge_dsl._files import user_roots

        return user_roots(self.allow_roots, self.env)
