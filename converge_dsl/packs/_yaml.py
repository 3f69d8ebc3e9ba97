"""The packs' door to the front end: load a YAML file and schema-check it.

Thin wrappers over the front end's public `load_file` and
`schema_diagnostics`, so pack manifests get the same strict loading and the
same located diagnostics as pipelines. The front end's reader is imported when
a file is read: a batch worker gets its packs' manifests read already.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.packs._files import PackRefused

if TYPE_CHECKING:
    from converge_dsl.diagnostics import Diagnostic
    from converge_dsl.frontend.document import LoadedDocument


def load_document(path: Path, *, display: str | None = None) -> LoadedDocument:
    """Parse a YAML file; raises `PackError` when absent, `PipelineInvalid` when not valid YAML.

    `display` names the file in diagnostics (default: `path`).
    """
    if not path.is_file():
        raise PackRefused(
            codes.PACK_FILE_NOT_FOUND, f"{path.name} not found in {path.parent.as_posix() or '.'}"
        )
    from converge_dsl.frontend import load_file

    return load_file(path, display=display)


def schema_diagnostics(doc: LoadedDocument, schema: str) -> list[Diagnostic]:
    """Diagnostics of `doc` against `schemas/<schema>`."""
    from converge_dsl.frontend import schema_diagnostics as frontend_schema_diagnostics

    return frontend_schema_diagnostics(doc, schema)
