"""A run configuration file: how runs behave, apart from what a pipeline says.

`read_run_config(path)` -> `RunConfig` loads the file `run --config FILE` names
(kind `RunConfig`, `schemas/run-config.v1.json`) through the front end's strict
loader. Every problem is located in the file and raised together as
`PipelineInvalid`: a schema violation, a `cache.mode` that is none of
`read-write`, `read-only`, `off` (CD978, with "did you mean"), a `cache.dir`
that names something other than a folder (CD979). `cache.dir` is relative to
the file's folder. The modes are the schema's (`MODES`, the answer cache's
`CACHE_MODES`). What the file says is the lowest layer but the defaults: a
command-line flag wins over an environment variable, which wins over the file
(`converge_dsl.runtime.cache_settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from converge_dsl import codes
from converge_dsl._files import display_name
from converge_dsl.diagnostics import Diagnostic, best_first, unknown_name_hint
from converge_dsl.errors import PipelineInvalid

from ._loader import load_file
from ._schema import load_schema, schema_diagnostics

SCHEMA_NAME = "run-config.v1.json"
CacheModeName = Literal["read-write", "read-only", "off"]
MODES: tuple[CacheModeName, ...] = ("read-write", "read-only", "off")
_MODE = ("cache", "mode")
_DIR = ("cache", "dir")


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """The `cache:` of a run configuration: its mode and folder (None: not said)."""

    mode: CacheModeName | None = None
    folder: Path | None = None


@dataclass(frozen=True, slots=True)
class RunConfig:
    """A loaded, checked run configuration file."""

    path: Path
    cache: CacheConfig = CacheConfig()


def read_run_config(path: Path, env: Mapping[str, str] | None = None) -> RunConfig:
    """Load and check the run configuration at `path` (see the module docstring), under
    the file-size cap of the environment `env` (default: the process's)."""
    document = load_file(path, display=display_name(path), env=env)
    data: Any = document.data
    cache = data.get("cache") if isinstance(data, dict) else None
    cache = cache if isinstance(cache, dict) else {}
    problems: list[Diagnostic] = []
    mode = cache.get("mode")
    if isinstance(mode, str) and mode not in MODES:
        problems.append(
            document.source_map.diagnostic(
                codes.RUN_CONFIG_BAD_CACHE_MODE,
                f"cache.mode {mode!r} is not a cache mode",
                _MODE,
                hint=unknown_name_hint(mode, MODES, f"use one of {', '.join(MODES)}"),
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
    said = next((m for m in MODES if m == mode), None)
    return RunConfig(path, CacheConfig(said, folder))


def schema_modes() -> tuple[str, ...]:
    """The modes the schema lists for `cache.mode` (`MODES`, held equal by a test)."""
    cache = load_schema(SCHEMA_NAME)["properties"]["cache"]["properties"]["mode"]
    return tuple(cache["enum"])
