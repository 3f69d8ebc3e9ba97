"""Locate the data folders that ship with converge-dsl.

`schemas/` and `builtin_packs/` sit at the top level of the repository and are
packaged into the wheel as `converge_dsl._schemas` and
`converge_dsl._builtin_packs`. An editable install does not map those data
packages, so we fall back to the folders beside the package.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

_REPOSITORY_ROOT = Path(__file__).resolve().parent.parent


def _data_folder(package: str, folder: str) -> Traversable:
    try:
        return files(package)
    except ModuleNotFoundError:
        return _REPOSITORY_ROOT / folder


def schemas_folder() -> Traversable:
    """The folder holding the published JSON Schemas (`*.v1.json`)."""
    return _data_folder("converge_dsl._schemas", "schemas")


def builtin_packs_folder() -> Traversable:
    """The folder holding the built-in packs served by the `builtin` repository."""
    return _data_folder("converge_dsl._builtin_packs", "builtin_packs")


def read_schema_text(name: str) -> str:
    """The text of `schemas/<name>`, e.g. `read_schema_text("pipeline.v1.json")`."""
    return schemas_folder().joinpath(name).read_text(encoding="utf-8")
