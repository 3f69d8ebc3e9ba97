"""The files around a pipeline: the pipeline a test file names, read with the front end's loader."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from converge_dsl.errors import PipelineInvalid, UsageError


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
    return (path.parent / named).resolve() if isinstance(named, str) else None
