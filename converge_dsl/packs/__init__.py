"""Packs and pack repositories: format, publish, sparse index, resolve, lock, cache, use.

Public surface:
- `load_pack(folder)` -> `Pack` (validated `pack.yaml`: `SuggestorDef`s, `InvariantDef`s),
  `parse_specifier(text)`, `build_archive`, `sha256_hex`, `unpack`;
- repositories: `Repository` (protocol), `FolderRepository`, `HttpRepository`,
  `BuiltinRepository`, `open_repositories`; their `PackIndex` of `IndexEntry`s;
  `publish` (-> `Published`: created or already there, signed by this call or not), `yank`,
  `generate_key` (ed25519 signing keys);
- `resolve(...)` -> `Resolved` from `Requirement`s; `lock_pipeline(pipeline)`, `PackCache`;
- the lock: `LOCK_FILE`, `LockFile` of `LockedPack`s, `read_lock`, `lock_hint`;
  `PipelinePacks`, a pipeline's `packs:` and `repositories:`;
- `load_locked_packs(pipeline, on_fetch=...)` (fetches what the cache lacks: `run`,
  `pack fetch`), `read_locked_packs(pipeline)` (the cache only: `validate`),
  `fetched_message(locked)`, `fetch_hint(pipeline)`;
- `lock_path(pipeline)`: the folder's `converge.lock`, a section per pipeline file;
- `PACK`, the `pack` suggestor kind (`SuggestorKind`, its spec `PackSuggestorSpec`),
  registered by `converge_dsl.validation.KINDS`; `compile_pack_suggestor(spec, ctx)`,
  its builder, which builds a `PackSolverSuggestor` or a suggestor from `instantiate_template`;
- `check_packs(facts)`, the pipeline check `validate` composes (cache only), and
  `fetching_pack_check(on_fetch)`, the one `run` composes (fetches what is missing);
  `check_pipeline_packs(doc)` and the finer checks `check_lock`, `check_pack_uses` (codes
  CD5xx, see `converge_dsl.codes`);
- `template_diagnostics(pack)`: a pack's templates compiled, located in its own files;
- `installed_solvers()`, the entry-point `SolverRegistry`;
- `add_pack_requirement(text, name, specifier)`, `add_repository(text, spec)` and
  `default_specifier`; `add_pack(pipeline, name, repo=...)` -> `Added`, all of `pack add`;
- `describe_pack(repository, "NAME[@VERSION]")` -> `PackInfo` of `SuggestorInfo`s, what
  `pack info` shows (parameters and input schema as outlines, output, invariants);
- `verify_pipeline(pipeline)` -> `VerifyReport` of `PackVerdict`s: each locked pack against
  its repository's index and archive, the lock and the pack cache (`pack verify`).

Names are imported on first use (PEP 562), so `validate` pays only for what a
pipeline needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_names

if TYPE_CHECKING:
    from converge_dsl.packs._add import (
        Added,
        add_pack,
    )
    from converge_dsl.packs._archive import (
        build_archive,
        sha256_hex,
        unpack,
    )
    from converge_dsl.packs._cache import (
        PackCache,
    )
    from converge_dsl.packs._checks import (
        check_lock,
        check_pack_uses,
        check_packs,
        check_pipeline_packs,
        fetching_pack_check,
    )
    from converge_dsl.packs._compile import (
        compile_pack_suggestor,
        instantiate_template,
    )
    from converge_dsl.packs._edit import (
        add_pack_requirement,
        add_repository,
        default_specifier,
    )
    from converge_dsl.packs._index import (
        IndexEntry,
        PackIndex,
    )
    from converge_dsl.packs._info import (
        PackInfo,
        SuggestorInfo,
        describe_pack,
    )
    from converge_dsl.packs._kind import PACK, PackSuggestorSpec
    from converge_dsl.packs._lint import (
        template_diagnostics,
    )
    from converge_dsl.packs._lockfile import (
        LOCK_FILE,
        LockedPack,
        LockFile,
        lock_hint,
        lock_path,
        read_lock,
    )
    from converge_dsl.packs._manifest import (
        InvariantDef,
        Pack,
        SuggestorDef,
        load_pack,
        parse_specifier,
    )
    from converge_dsl.packs._publish import (
        Published,
        publish,
        yank,
    )
    from converge_dsl.packs._registry import (
        SolverRegistry,
        installed_solvers,
    )
    from converge_dsl.packs._repository import (
        BuiltinRepository,
        FolderRepository,
        HttpRepository,
        Repository,
        open_repositories,
    )
    from converge_dsl.packs._resolve import (
        Requirement,
        Resolved,
        resolve,
    )
    from converge_dsl.packs._signing import (
        generate_key,
    )
    from converge_dsl.packs._suggestor import (
        PackSolverSuggestor,
    )
    from converge_dsl.packs._verify import (
        PackVerdict,
        VerifyReport,
        verify_pipeline,
    )
    from converge_dsl.packs._workspace import (
        PipelinePacks,
        fetch_hint,
        fetched_message,
        load_locked_packs,
        lock_pipeline,
        read_locked_packs,
    )

_WHERE: dict[str, str] = {
    "Added": "converge_dsl.packs._add",
    "BuiltinRepository": "converge_dsl.packs._repository",
    "FolderRepository": "converge_dsl.packs._repository",
    "HttpRepository": "converge_dsl.packs._repository",
    "IndexEntry": "converge_dsl.packs._index",
    "InvariantDef": "converge_dsl.packs._manifest",
    "LOCK_FILE": "converge_dsl.packs._lockfile",
    "LockFile": "converge_dsl.packs._lockfile",
    "LockedPack": "converge_dsl.packs._lockfile",
    "Pack": "converge_dsl.packs._manifest",
    "PACK": "converge_dsl.packs._kind",
    "PackCache": "converge_dsl.packs._cache",
    "PackIndex": "converge_dsl.packs._index",
    "PackInfo": "converge_dsl.packs._info",
    "PackSolverSuggestor": "converge_dsl.packs._suggestor",
    "PackSuggestorSpec": "converge_dsl.packs._kind",
    "PackVerdict": "converge_dsl.packs._verify",
    "PipelinePacks": "converge_dsl.packs._workspace",
    "Published": "converge_dsl.packs._publish",
    "Repository": "converge_dsl.packs._repository",
    "Requirement": "converge_dsl.packs._resolve",
    "Resolved": "converge_dsl.packs._resolve",
    "SolverRegistry": "converge_dsl.packs._registry",
    "SuggestorDef": "converge_dsl.packs._manifest",
    "SuggestorInfo": "converge_dsl.packs._info",
    "VerifyReport": "converge_dsl.packs._verify",
    "add_pack": "converge_dsl.packs._add",
    "add_pack_requirement": "converge_dsl.packs._edit",
    "add_repository": "converge_dsl.packs._edit",
    "build_archive": "converge_dsl.packs._archive",
    "check_lock": "converge_dsl.packs._checks",
    "check_pack_uses": "converge_dsl.packs._checks",
    "check_packs": "converge_dsl.packs._checks",
    "check_pipeline_packs": "converge_dsl.packs._checks",
    "compile_pack_suggestor": "converge_dsl.packs._compile",
    "default_specifier": "converge_dsl.packs._edit",
    "describe_pack": "converge_dsl.packs._info",
    "fetch_hint": "converge_dsl.packs._workspace",
    "fetched_message": "converge_dsl.packs._workspace",
    "fetching_pack_check": "converge_dsl.packs._checks",
    "generate_key": "converge_dsl.packs._signing",
    "installed_solvers": "converge_dsl.packs._registry",
    "instantiate_template": "converge_dsl.packs._compile",
    "load_locked_packs": "converge_dsl.packs._workspace",
    "load_pack": "converge_dsl.packs._manifest",
    "lock_hint": "converge_dsl.packs._lockfile",
    "lock_path": "converge_dsl.packs._lockfile",
    "lock_pipeline": "converge_dsl.packs._workspace",
    "open_repositories": "converge_dsl.packs._repository",
    "parse_specifier": "converge_dsl.packs._manifest",
    "publish": "converge_dsl.packs._publish",
    "read_lock": "converge_dsl.packs._lockfile",
    "read_locked_packs": "converge_dsl.packs._workspace",
    "resolve": "converge_dsl.packs._resolve",
    "sha256_hex": "converge_dsl.packs._archive",
    "template_diagnostics": "converge_dsl.packs._lint",
    "unpack": "converge_dsl.packs._archive",
    "verify_pipeline": "converge_dsl.packs._verify",
    "yank": "converge_dsl.packs._publish",
}

__all__ = [
    "LOCK_FILE",
    "PACK",
    "Added",
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
    "PackInfo",
    "PackSolverSuggestor",
    "PackSuggestorSpec",
    "PackVerdict",
    "PipelinePacks",
    "Published",
    "Repository",
    "Requirement",
    "Resolved",
    "SolverRegistry",
    "SuggestorDef",
    "SuggestorInfo",
    "VerifyReport",
    "add_pack",
    "add_pack_requirement",
    "add_repository",
    "build_archive",
    "check_lock",
    "check_pack_uses",
    "check_packs",
    "check_pipeline_packs",
    "compile_pack_suggestor",
    "default_specifier",
    "describe_pack",
    "fetch_hint",
    "fetched_message",
    "fetching_pack_check",
    "generate_key",
    "installed_solvers",
    "instantiate_template",
    "load_locked_packs",
    "load_pack",
    "lock_hint",
    "lock_path",
    "lock_pipeline",
    "open_repositories",
    "parse_specifier",
    "publish",
    "read_lock",
    "read_locked_packs",
    "resolve",
    "sha256_hex",
    "template_diagnostics",
    "unpack",
    "verify_pipeline",
    "yank",
]

__getattr__ = lazy_names(__name__, _WHERE)
