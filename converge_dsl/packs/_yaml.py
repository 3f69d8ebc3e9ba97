"""The packs' door to the front end: load a YAML file and schema-check it.

Thin wrappers over the front end's public `load_file` and
`schema_diagnostics`, so pack manifests get the same strict loading and the
same located diagnostics as pipelines.
"""

from __future__ import annotations

from pathlib import Path

from converge_dsl.diagnostics import Diagnostic
from converge_dsl.errors import PackError
from converge_dsl.frontend import load_file
from converge_dsl.frontend import schema_diagnostics as frontend_schema_diagnostics
from converge_dsl.frontend.document import LoadedDocument


def load_document(path: Path, *, display: str | None = None) -> LoadedDocument:
    """Parse a YAML file; raises `PackError` when absent, `PipelineInvalid` when not valid YAML.

    `display` names the file in diagnostics (default: `path`).
    """
    if not path.is_file():
        raise PackError(f"{path.name} not found in {path.parent.as_posix() or '.'}")
    return load_file(path, display=display)


def schema_diagnostics(doc: LoadedDocument, schema: str) -> list[Diagnostic]:
    """Diagnostics of `doc` against `schemas/<schema>`."""
    return frontend_schema_diagnostics(doc, schema)
