"""`RunOptions`: everything `converge-dsl run` can say, as the runtime receives it."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from converge_dsl.clock import Clock, SystemClock


@dataclass(frozen=True)
class RunOptions:
    """Everything `converge-dsl run` can say. Paths are as the user gave them.

    `allow_roots` are the folders (`--allow-root DIR`) where files the pipeline
    names may lie besides its own folder; those of `CONVERGE_DSL_ALLOW_ROOTS`
    in `env` are added (`roots`).
    """

    pipeline: Path
    inputs: Mapping[str, Any] = field(default_factory=dict)
    model_overrides: Mapping[str, str] = field(default_factory=dict)
    trace: Path | None = None
    checkpoint: Path | None = None
    resume: Path | None = None
    record: Path | None = None
    replay: Path | None = None
    # `--overwrite`: `--record` replaces a cassette already there (else it is refused).
    overwrite: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=SystemClock)
    listeners: tuple[Callable[[BaseModel], None], ...] = ()
    decisions: Mapping[str, bool] = field(default_factory=dict)
    # Hears `fetched pack NAME VERSION from REPOSITORY` for each pack fetched into the cache.
    on_fetch: Callable[[str], object] | None = None
    allow_roots: tuple[Path, ...] = ()
    # Use the on-disk compile cache (`--no-cache` turns it off; so does CONVERGE_DSL_NO_CACHE=1).
    compile_cache: bool = True
    # A process that runs this one pipeline (the command line): once it is loaded and
    # once it is compiled, every live object goes to the collector's permanent
    # generation (`gc.freeze`), so collections during the run skip them.
    freeze_compiled: bool = False
    # OpenTelemetry export (`converge_dsl.runtime._telemetry`): `--otel` turns it on (so does
    # an OTEL_* variable of `env` naming an exporter); `--otel-content` records prompts and
    # answers (redacted); `span_exporter` (an SDK `SpanExporter`) replaces the configured
    # exporter (tests, embedding applications). `on_warning` hears each warning line
    # (export failures); None writes them to standard error.
    otel: bool = False
    otel_content: bool = False
    span_exporter: Any = None
    on_warning: Callable[[str], object] | None = None

    @property
    def roots(self) -> tuple[Path, ...]:
        """Every allowed root besides the pipeline's folder, resolved (`--allow-root`, env)."""
        from converge_dsl._files import user_roots

        return user_roots(self.allow_roots, self.env)
