"""Packs and pack repositories: format, publish, sparse index, resolve, lock, cache, use.

Public surface:
- `load_pack(folder) -> Pack` (validated `pack.yaml`), `build_archive`, `unpack`;
- repositories: `FolderRepository`, `HttpRepository`, `BuiltinRepository`,
  `open_repositories`; `publish`, `yank`;
- `resolve(...)`, `lock_pipeline(pipeline)`, `load_locked_packs(pipeline)`, `PackCache`;
- `compile_pack_suggestor(spec, path, ctx)`: the compiler's builder for `kind: pack`;
- `check_pipeline_packs(doc)` and the finer checks (codes CD3xx, see `_checks`);
- `installed_solvers()`, the entry-point solver registry;
- `add_pack_requirement(text, name, specifier)` for `pack add`.
"""

from __future__ import annotations

from converge_dsl.packs._archive import build_archive, sha256_hex, unpack
from converge_dsl.packs._cache import PackCache
from converge_dsl.packs._checks import check_lock, check_pack_uses, check_pipeline_packs
from converge_dsl.packs._compile import compile_pack_suggestor, instantiate_template
from converge_dsl.packs._edit import add_pack_requirement, default_specifier
from converge_dsl.packs._index import IndexEntry, PackIndex
from converge_dsl.packs._lockfile import LOCK_NAME, LockedPack, LockFile, read_lock
from converge_dsl.packs._manifest import InvariantDef, Pack, SuggestorDef, load_pack
from converge_dsl.packs._publish import publish, yank
from converge_dsl.packs._registry import SolverRegistry, installed_solvers
from converge_dsl.packs._repository import (
    BuiltinRepository,
    FolderRepository,
    HttpRepository,
    Repository,
    open_repositories,
)
from converge_dsl.packs._resolve import Requirement, Resolved, resolve
from converge_dsl.packs._signing import generate_key
from converge_dsl.packs._suggestor import PackSolverSuggestor
from converge_dsl.packs._workspace import PipelinePacks, load_locked_packs, lock_pipeline

__all__ = [
    "LOCK_NAME",
    "BuiltinRepository",
    "FolderRepository",
    "HttpRepository",
    "IndexEntry",
    "InvariantDef",
    "LockFile",
    "LockedPack",
    "Pack",
    "PackCache",
    "PackIndex",
    "PackSolverSuggestor",
    "PipelinePacks",
    "Repository",
    "Requirement",
    "Resolved",
    "SolverRegistry",
    "SuggestorDef",
    "add_pack_requirement",
    "build_archive",
    "check_lock",
    "check_pack_uses",
    "check_pipeline_packs",
    "compile_pack_suggestor",
    "default_specifier",
    "generate_key",
    "installed_solvers",
    "instantiate_template",
    "load_locked_packs",
    "load_pack",
    "lock_pipeline",
    "open_repositories",
    "publish",
    "read_lock",
    "resolve",
    "sha256_hex",
    "unpack",
    "yank",
]
