"""A run configuration file: how runs behave, apart from what a pipeline says.

`read_run_config(path)` -> `RunConfig` loads the file `run --config FILE` names
(kind `RunConfig`, `schemas/run-config.v1.json`) through the front end's strict
loader. Every problem is located in the file and raised together as
`PipelineInvalid`: a schema violation, a `cache.mode` that is none of
`read-write`, `read-only`, `off` (CD978, with "did you mean"), a `cache.dir`
that names something other than a folder (CD979). `cache.dir` is relative to
the file's folder. What the file says is the lowest layer but the defaults: a
command-line flag wins over an environment variable, which wins over the file
(`_answer_cache.cache_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge_dsl import codes
from converge_dsl._files import display_name
from converge_dsl.diagnostics import Diagnostic, best_first, unknown_name_hint
from converge_dsl.errors import PipelineInvalid
from converge_dsl.models.caching import CACHE_MODES, CacheMode

SCHEMA_NAME = "run-config.v1.json"
_MODE = ("cache", "mode")
_DIR = ("cache", "dir")


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """The `cache:` of a run configuration: its mode and folder (None: not said)."""

    mode: CacheMode | None = None
    folder: Path | None = None


@dataclass(frozen=True, slots=True)
class RunConfig:
    """A loaded, checked run configuration file."""

    path: Path
    cache: CacheConfig = CacheConfig()


def read_run_config(path: Path) -> RunConfig:
    """Load and check the run configuration at `path` (see the module docstring)."""
    from converge_dsl.frontend import load_file, schema_diagnostics

    document = load_file(path, display=display_name(path))
    data: Any = document.data
    cache = data.get("cache") if isinstance(data, dict) else None
    cache = cache if isinstance(cache, dict) else {}
    problems: list[Diagnostic] = []
    mode = cache.get("mode")
    if isinstance(mode, str) and mode not in CACHE_MODES:
        problems.append(
            document.source_map.diagnostic(
                codes.RUN_CONFIG_BAD_CACHE_MODE,
                f"cache.mode {mode!r} is not a cache mode",
                _MODE,
                hint=unknown_name_hint(mode, CACHE_MODES, f"use one of {', '.join(CACHE_MODES)}"),
            )
        )
    problems.extend(
        d for d in schema_diagnostics(document, SCHEMA_NAME) if d.is_error and d.path != _MODE
    )
    named = cache.get("dir")
    folder = path.parent / named if isinstance(named, str) and named else None
    if folder is not None and folder.exists() and not folder.is_dir():
        problems.append(
            document.source_map.diagnostic(
                codes.RUN_CONFIG_BAD_CACHE_DIR,
                f"cache.dir {named!r} is a file, not a folder",
                _DIR,
                hint="name a folder (it is made when missing), relative to this file's folder",
            )
        )
    if problems:
        raise PipelineInvalid(best_first(problems))
    return RunConfig(path, CacheConfig(mode if mode in CACHE_MODES else None, folder))
