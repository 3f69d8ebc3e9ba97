"""The files around a pipeline: the pipeline a test file names, read with the front end's loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from converge_dsl.errors import PipelineInvalid


def loaded(path: Path, text: str) -> Any:
    """The loaded document of a converge-dsl YAML file (test, model script), or None."""
    from converge_dsl.frontend import load_text

    try:
        return load_text(text.removeprefix("\ufeff"), path.as_posix())
    except PipelineInvalid:
        return None


def tested_pipeline(path: Path, text: str) -> Path | None:
    """The pipeline a test file's `pipeline:` names, resolved beside the test file."""
    document = loaded(path, text)
    named = document.data.get("pipeline") if document and isinstance(document.data, dict) else None
    return (path.parent / named).resolve() if isinstance(named, str) else None
