"""Compile once, run many: what the runs of one loaded pipeline share (docs/architecture.md §12).

A loaded `Pipeline` (`converge_dsl.batch`) runs many times; most of what a
run is made of depends only on the document and the run's resolved inputs.
`CompiledRuns` keeps, per distinct inputs:

- the `PipelineSettings` (always: they are immutable; reading them checks
  every key schema and builds the gate's validators);
- the `CompiledPipeline`, when another run may use it: no suggestor keeps
  per-run state (`StatefulSuggestor`), and either the pipeline declares no
  models (so no suggestor holds a run's model, usage meter or event sink) or
  every suggestor takes another run's parts (`for_run`, see
  `converge_dsl.compiler.RunParts`: the seed, rule, llm, tool and pack solver
  kinds). A run then gets each suggestor's `for_run` with its own models,
  meter and sink, and builds a fresh engine around them.

Any other pipeline with models compiles its suggestors per run (each run has
its own models and meter), from the shared settings. Inputs that are not JSON
data are not kept (each such run resolves its own). At most `limit` inputs are
kept; past that the oldest go.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from functools import cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from converge_dsl._json_types import JsonObject
from converge_dsl.compiler import compile_settings

from ._suggestor_state import stateful

if TYPE_CHECKING:
    from converge_dsl.compiler import CompiledPipeline, PipelineSettings, RunParts
    from converge_dsl.frontend.document import LoadedDocument

_Entry = tuple["PipelineSettings", "CompiledPipeline | None"]


class CompiledRuns:
    """The settings and compiled pipeline the runs of one document share (module docstring)."""

    __slots__ = ("_entries", "_limit", "_lock")

    def __init__(self, limit: int = 16) -> None:
        self._entries: dict[str, _Entry] = {}
        self._limit = limit
        self._lock = threading.Lock()

    def settings(self, document: LoadedDocument, inputs: JsonObject) -> PipelineSettings:
        """The settings for `inputs` (resolved once per distinct inputs)."""
        key = _key(inputs)
        entry = None if key is None else self._entries.get(key)
        if entry is not None:
            return entry[0]
        settings = compile_settings(document, inputs=inputs)
        if key is not None:
            self._keep(key, (settings, None))
        return settings

    def compiled(self, inputs: JsonObject, run: RunParts) -> CompiledPipeline | None:
        """The compiled pipeline kept for `inputs`, as the run of `run`'s parts uses it
        (None if none was kept)."""
        key = _key(inputs)
        entry = None if key is None else self._entries.get(key)
        kept = None if entry is None else entry[1]
        return None if kept is None else for_run(kept, run)

    def offer(self, inputs: JsonObject, compiled: CompiledPipeline) -> None:
        """Keep `compiled` for the runs with `inputs` if another run may use it."""
        key = _key(inputs)
        if key is None or not reusable(compiled):
            return
        self._keep(key, (compiled.settings, compiled))

    def _keep(self, key: str, entry: _Entry) -> None:
        with self._lock:
            if key not in self._entries and len(self._entries) >= self._limit:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = entry


def reusable(compiled: CompiledPipeline) -> bool:
    """Whether another run may use `compiled`, through `for_run` (see the module docstring)."""
    if stateful(compiled.suggestors):
        return False
    return not compiled.settings.models or all(_for_runs(type(s)) for s in compiled.suggestors)


def for_run(compiled: CompiledPipeline, run: RunParts) -> CompiledPipeline:
    """`compiled` (`reusable`) with the parts of another run: each suggestor's `for_run`
    and the run's models; as it is when it declares no models."""
    if not compiled.settings.models:
        return compiled
    suggestors = tuple(s.for_run(run) for s in compiled.suggestors)  # type: ignore[attr-defined]
    if all(a is b for a, b in zip(suggestors, compiled.suggestors, strict=True)):
        suggestors = compiled.suggestors  # the engine registers a tuple it knows only once
    return replace(compiled, suggestors=suggestors, models=MappingProxyType(dict(run.models)))


@cache
def _for_runs(kind: type) -> bool:
    """Whether the instances of `kind` take another run's parts (`for_run`)."""
    return callable(getattr(kind, "for_run", None))


def _key(inputs: JsonObject) -> str | None:
    try:
        return json.dumps(inputs, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
