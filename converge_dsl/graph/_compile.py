"""Load -> validate -> compile a pipeline for drawing, never running it.

The pipeline is validated as `validate` does and compiled as `run` compiles it
(locked packs the cache lacks are fetched and verified first, as `run` does)
(docs/architecture.md §1, §12), with every suggestor kind of the runtime.
Models are never built: each declared model is an `OfflineModel` that refuses
every call, so drawing needs no API key, reads no model script, and opens no
connection.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from converge_dsl._json_types import JsonObject
from converge_dsl.compiler import CompiledPipeline, compile_pipeline, compile_settings
from converge_dsl.engine import UsageMeter
from converge_dsl.models.port import (
    ModelDefaults,
    ModelError,
    ModelErrorCode,
    ModelRequest,
    ModelReturn,
)
from converge_dsl.runtime import SUGGESTOR_KINDS


class OfflineModel(ModelDefaults):
    """A declared model that is never called (drawing a graph runs nothing)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def model_id(self) -> str:
        return self._name

    async def call(self, req: ModelRequest) -> ModelReturn:
        raise ModelError(ModelErrorCode.CONFIG, f"model {self._name!r} is not called by graph")

    async def aclose(self) -> None:
        return None


def compile_for_graph(
    path: Path,
    *,
    inputs: JsonObject,
    roots: Sequence[Path] = (),
    on_fetch: Callable[[str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> CompiledPipeline:
    """The compiled pipeline at `path`; raises `PipelineInvalid` (exit 2) with the
    diagnostics of `validate`, or `UsageError` for unknown or missing inputs.
    `on_fetch` hears one line per pack fetched into the cache; `env` is the
    environment the checks read (default: the process's)."""
    from converge_dsl.validation import load_pipeline

    document = load_pipeline(path, roots=roots, fetch=True, on_fetch=on_fetch, env=env)
    settings = compile_settings(document, inputs=inputs)
    models = {name: OfflineModel(name) for name in settings.models}
    return compile_pipeline(
        settings, models=models, usage=UsageMeter(settings.budget), kinds=SUGGESTOR_KINDS
    )
