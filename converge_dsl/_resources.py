"""Locate the data folders that ship with converge-dsl.

`schemas/` and `builtin_packs/` sit at the top level of the repository and are
packaged into the wheel as the folders `converge_dsl/_schemas` and
`converge_dsl/_builtin_packs`; `docs/errors.md` (read by `converge-dsl
explain`) as `converge_dsl/_docs/errors.md`. An editable install does not map those data
packages, so we fall back to the folders beside the package. Plain paths (not
`importlib.resources`) keep the import cost of `validate` low: the package is
always installed as files, never from a zip.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _data_folder(packaged: str, folder: str) -> Path:
    inside = _PACKAGE / packaged
    return inside if inside.is_dir() else _PACKAGE.parent / folder


def schemas_folder() -> Path:
    """The folder holding the published JSON Schemas (`*.v1.json`)."""
    return _data_folder("_schemas", "schemas")


def builtin_packs_folder() -> Path:
    """The folder holding the built-in packs served by the `builtin` repository."""
    return _data_folder("_builtin_packs", "builtin_packs")


def read_schema_text(name: str) -> str:
    """The text of `schemas/<name>`, e.g. `read_schema_text("pipeline.v1.json")`."""
    return (schemas_folder() / name).read_text(encoding="utf-8")


def errors_doc_path() -> Path:
    """`docs/errors.md`: every diagnostic code's documentation and example."""
    return _data_folder("_docs", "docs") / "errors.md"
