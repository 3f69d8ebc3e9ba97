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
- the locked packs read for a loaded document, kept for its compiles: `handed_packs(doc)`
  (the lock's bytes and the packs, to hand to a batch worker with the document) and
  `keep_packs(doc, lock, packs)` (what the worker keeps them with);
- the pipeline's MCP tool servers in it: `lock_tool_servers(pipeline)` (each started, read,
  stopped), `locked_tool_servers(pipeline)` (what a run holds them to) and
  `check_tool_lock(facts)`, validate's check (CD265, CD266);
- a pack's own tool servers (`Pack.tools`, run only when the pipeline's `trust:` lists
  them, named `PACK/SERVER`): `pack_servers(packs, trust, pins)`, `trusted_pack_servers(
  pipeline, manifest)` (a run's, each with its pack's pin in the lock, which keys its cached
  answers), `lock_pack_servers(...)` (`lock`'s) and `check_pack_tools(...)`,
  validate's check (CD261, CD265, CD266, CD269, CD270);
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

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.packs._add import *  # noqa: F403
    from converge_dsl.packs._archive import *  # noqa: F403
    from converge_dsl.packs._bind import *  # noqa: F403
    from converge_dsl.packs._cache import *  # noqa: F403
    from converge_dsl.packs._checks import *  # noqa: F403
    from converge_dsl.packs._compile import *  # noqa: F403
    from converge_dsl.packs._edit import *  # noqa: F403
    from converge_dsl.packs._index import *  # noqa: F403
    from converge_dsl.packs._info import *  # noqa: F403
    from converge_dsl.packs._kind import *  # noqa: F403
    from converge_dsl.packs._lint import *  # noqa: F403
    from converge_dsl.packs._loaded import *  # noqa: F403
    from converge_dsl.packs._lockfile import *  # noqa: F403
    from converge_dsl.packs._manifest import *  # noqa: F403
    from converge_dsl.packs._pack_tools import *  # noqa: F403
    from converge_dsl.packs._publish import *  # noqa: F403
    from converge_dsl.packs._registry import *  # noqa: F403
    from converge_dsl.packs._repository import *  # noqa: F403
    from converge_dsl.packs._resolve import *  # noqa: F403
    from converge_dsl.packs._signing import *  # noqa: F403
    from converge_dsl.packs._suggestor import *  # noqa: F403
    from converge_dsl.packs._tool_lock import *  # noqa: F403
    from converge_dsl.packs._verify import *  # noqa: F403
    from converge_dsl.packs._workspace import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.packs._add": ("Added", "add_pack"),
            "converge_dsl.packs._archive": ("build_archive", "sha256_hex", "unpack"),
            "converge_dsl.packs._cache": ("PackCache",),
            "converge_dsl.packs._checks": (
                "check_lock",
                "check_pack_uses",
                "check_packs",
                "check_pipeline_packs",
                "fetching_pack_check",
            ),
            "converge_dsl.packs._bind": ("instantiate_template",),
            "converge_dsl.packs._compile": ("compile_pack_suggestor",),
            "converge_dsl.packs._edit": (
                "add_pack_requirement",
                "add_repository",
                "default_specifier",
            ),
            "converge_dsl.packs._index": ("IndexEntry", "PackIndex"),
            "converge_dsl.packs._info": ("PackInfo", "SuggestorInfo", "describe_pack"),
            "converge_dsl.packs._kind": ("PACK", "PackSuggestorSpec"),
            "converge_dsl.packs._lint": ("template_diagnostics",),
            "converge_dsl.packs._loaded": ("handed_packs", "keep_packs"),
            "converge_dsl.packs._lockfile": (
                "LOCK_FILE",
                "LockFile",
                "LockedPack",
                "lock_hint",
                "lock_path",
                "read_lock",
            ),
            "converge_dsl.packs._manifest": (
                "InvariantDef",
                "Pack",
                "SuggestorDef",
                "load_pack",
                "parse_specifier",
            ),
            "converge_dsl.packs._publish": ("Published", "publish", "yank"),
            "converge_dsl.packs._pack_tools": (
                "check_pack_tools",
                "lock_pack_servers",
                "pack_servers",
            ),
            "converge_dsl.packs._registry": ("SolverRegistry", "installed_solvers"),
            "converge_dsl.packs._repository": (
                "BuiltinRepository",
                "FolderRepository",
                "HttpRepository",
                "Repository",
                "open_repositories",
            ),
            "converge_dsl.packs._resolve": ("Requirement", "Resolved", "resolve"),
            "converge_dsl.packs._signing": ("generate_key",),
            "converge_dsl.packs._suggestor": ("PackSolverSuggestor",),
            "converge_dsl.packs._tool_lock": (
                "check_tool_lock",
                "lock_tool_servers",
                "locked_tool_servers",
            ),
            "converge_dsl.packs._verify": ("PackVerdict", "VerifyReport", "verify_pipeline"),
            "converge_dsl.packs._workspace": (
                "PipelinePacks",
                "fetch_hint",
                "fetched_message",
                "load_locked_packs",
                "lock_pipeline",
                "read_locked_packs",
                "trusted_pack_servers",
            ),
        },
    )
