"""The files around a pipeline: the pipeline a test file names, read with the front end's loader,
and the file a name written in a file names (`beside`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from converge_dsl.errors import PipelineInvalid, UsageError


def beside(path: Path, name: str) -> Path | None:
    """The file `name` names, written in the file at `path` (relative to its folder), resolved;
    None for a name no file can have (a NUL byte in it)."""
    return None if "\x00" in name else (path.parent / name).resolve()


def loaded(path: Path, text: str, env: Mapping[str, str] | None) -> Any:
    """The loaded document of a converge-dsl YAML file (test, model script), or None;
    `env` is the environment whose size cap bounds it (None: the process's)."""
    from converge_dsl.frontend import load_text

    try:
        return load_text(text.removeprefix("\ufeff"), path.as_posix(), env=env)
    except (PipelineInvalid, UsageError):
        return None


def tested_pipeline(path: Path, text: str, env: Mapping[str, str] | None) -> Path | None:
    """The pipeline a test file's `pipeline:` names, resolved beside the test file."""
    document = loaded(path, text, env)
    named = document.data.get("pipeline") if document and isinstance(document.data, dict) else None
    return beside(path, named) if isinstance(named, str) else None
