"""The model-file check: scripts and cassettes exist; scripts load as `run` loads them.

`check_model_scripts` is a `converge_dsl.frontend.Check`, composed by
`converge_dsl.validation`. A scripted model's script goes through the
scripted adapter's own loader (`_script.load_script_file`: strict YAML,
`model-script.v1.json`, regexes that compile and cannot backtrack for hours),
exactly as `run` loads it; that module imports neither the HTTP adapters nor
the engine, asyncio or pydantic, and only when a pipeline has a scripted
model. Problems are located in the script file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic

if TYPE_CHECKING:
    from converge_dsl.frontend import PipelineFacts


def check_model_scripts(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """`MISSING_FILE` for a script or cassette that is not a file; a script's own problems."""
    if facts.base_dir is None:
        return
    for name, model in facts.data.get("models", {}).items():
        for field in ("script", "cassette"):
            if field not in model:
                continue
            path = facts.base_dir / model[field]
            if not path.is_file():
                what = "is a folder, not a file" if path.is_dir() else "not found"
                yield facts.error(
                    codes.MISSING_FILE,
                    f"{field} file {model[field]!r} {what}",
                    ("models", name, field),
                    hint="paths are relative to the pipeline file",
                )
            elif field == "script" and model.get("adapter") == "scripted":
                display = (Path(facts.document.file).parent / model[field]).as_posix()
                yield from _script_problems(path, display)


def _script_problems(path: Path, display: str) -> Iterator[Diagnostic]:
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.models._script import load_script_file

    try:
        load_script_file(path, display=display)
    except PipelineInvalid as exc:
        yield from exc.diagnostics
