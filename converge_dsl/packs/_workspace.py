"""Packs as a pipeline sees them: lock a pipeline, load its locked packs.

`lock_pipeline` resolves the pipeline's `packs:` against its `repositories:`,
refuses a pin that would move down or to another digest without
`allow_downgrade` / `repin`, fetches and verifies every pinned archive into
the cache (so the next run works offline) and writes the pipeline's section
of `converge.lock` beside it (`lock_path`); an unreadable lock file is replaced, with a warning,
and a pin it keeps although its repository yanked it is warned about (CD572).
`load_locked_packs` is what `run` and `pack fetch` call: it refuses a missing
or stale lock with the reason and the command that fixes it, then installs
each pinned pack from the cache (downloading only what is missing, and saying
so through `on_fetch`). `read_locked_packs` is what `validate` calls: the
same refusal, then only what the cache already holds, and the pinned packs
it lacks; it never touches the network and never writes the cache.
`yanked_pins` is what `validate` and `run` add: a CD572 notice for each pin
its repository has yanked since, read from the repositories that need no
network (folders, `builtin`); one served over HTTP is checked by `lock` and
`pack verify`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet

from converge_dsl import codes
from converge_dsl.diagnostics import best_first, did_you_mean, suggestion
from converge_dsl.errors import PackError, PipelineInvalid, UsageError
from converge_dsl.frontend import PipelineManifest
from converge_dsl.packs._cache import PackCache
from converge_dsl.packs._files import Notice, PackRefused
from converge_dsl.packs._index import PackIndex
from converge_dsl.packs._loaded import lock_bytes
from converge_dsl.packs._lockfile import (
    LockedPack,
    LockFile,
    lock_from_resolution,
    lock_hint,
    lock_problems,
    missing_repository_hint,
    read_lock,
    write_lock,
)
from converge_dsl.packs._manifest import Pack, load_pack, parse_specifier
from converge_dsl.packs._pack_tools import PackServer, lock_pack_servers, pack_servers
from converge_dsl.packs._repository import (
    BUILTIN,
    Repository,
    open_repositories,
    open_repository,
)
from converge_dsl.packs._yaml import load_document, schema_diagnostics

if TYPE_CHECKING:
    import httpx
    from packaging.version import Version

    from converge_dsl.packs._resolve import Resolved
    from converge_dsl.tools import LockedServer, ServerFactory

PIPELINE_SCHEMA = "pipeline.v1.json"
_API_VERSION = "converge-dsl/v1"
# The fields `lock` and `pack` read of a pipeline.
_OURS = (("packs",), ("repositories",), ("trust",))


@dataclass(frozen=True, slots=True)
class PipelinePacks:
    """The pack-related fields of a pipeline file."""

    path: Path
    name: str
    packs: Mapping[str, str]
    repositories: tuple[object, ...]
    trust: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path, manifest: PipelineManifest | None = None) -> PipelinePacks:
        """The pipeline's `packs:`, `repositories:` and `trust:`.

        `manifest` is the validated document's (`validate`, `run`); without it the
        file is loaded here (`lock`, `pack`) and those two fields are checked against
        the pipeline schema, so a malformed entry is a located diagnostic
        (`PipelineInvalid`), never a guess at what it meant; a file that does not say
        it is a pipeline (`apiVersion`, `kind`) is `PipelineInvalid` with every error
        validate finds in it.
        """
        if manifest is not None:
            return cls(
                path=path,
                name=manifest.name,
                packs={p.name: p.specifier for p in manifest.packs},
                repositories=tuple(r.written for r in manifest.repositories),
                trust=dict(manifest.trust),
            )
        doc = load_document(path)
        data = doc.data if isinstance(doc.data, Mapping) else {}
        packs = data.get("packs") or {}
        repositories = data.get("repositories") or ()
        if not isinstance(packs, Mapping):
            raise PackRefused(
                codes.PIPELINE_PACKS_MALFORMED,
                f"{path.name}: packs: must be a mapping of pack name to specifier",
            )
        if not isinstance(repositories, list | tuple):
            raise PackRefused(
                codes.PIPELINE_PACKS_MALFORMED,
                f"{path.name}: repositories: must be a list",
                hint="e.g. repositories: [builtin, {path: ./pack-repo}]",
            )
        diagnostics = schema_diagnostics(doc, PIPELINE_SCHEMA)
        if data.get("apiVersion") != _API_VERSION or data.get("kind") != "Pipeline":
            # Not a pipeline at all (a trace, a run result, a test file): nothing to lock,
            # before a lock section is written for it. Another kind of ours is one usage
            # error naming what takes it, as `run` says; anything else is reported as
            # validate reports it.
            from converge_dsl._file_kinds import PIPELINE, refuse_other_kind

            refuse_other_kind(doc, PIPELINE)
            found = best_first([d for d in diagnostics if d.is_error])
        else:
            found = [d for d in diagnostics if d.path[:1] in _OURS]
        if found:
            raise PipelineInvalid(found)
        return cls(
            path=path,
            name=str(data.get("name", path.stem)),
            packs={str(k): str(v) for k, v in packs.items()},
            repositories=tuple(repositories),
            trust={str(k): tuple(str(s) for s in v) for k, v in (data.get("trust") or {}).items()},
        )

    @property
    def requester(self) -> str:
        return f"pipeline {self.name!r}"

    def specifiers(self) -> dict[str, SpecifierSet]:
        out: dict[str, SpecifierSet] = {}
        for name, text in self.packs.items():
            spec = parse_specifier(text)
            if spec is None:
                raise PackRefused(
                    codes.PIPELINE_PACKS_MALFORMED,
                    f"packs.{name}: {text!r} is not a PEP 440 specifier",
                )
            out[name] = spec
        return out

    def open(self, client: httpx.Client | None = None) -> dict[str, Repository]:
        repositories = open_repositories(self.repositories, self.path.parent, client)
        return {r.id: r for r in repositories}


def _open_locked(name: str, locked: LockedPack, folder: Path) -> Pack:
    pack = load_pack(folder, display=f"{name}-{locked.version}")
    if pack.name != name or str(pack.version) != locked.version:
        raise PackRefused(
            codes.PACK_NOT_INSTALLABLE,
            f"the archive locked as {name} {locked.version} holds {pack.name} {pack.version}",
        )
    return pack


def fetched_message(locked: LockedPack) -> str:
    """The line `run` and `pack fetch` print for a pack downloaded into the cache."""
    return f"fetched pack {locked.name} {locked.version} from {locked.repository}"


def _install_all(
    lock: LockFile,
    repositories: Mapping[str, Repository],
    cache: PackCache,
    on_fetch: Callable[[str], object] | None = None,
) -> dict[str, Pack]:
    packs: dict[str, Pack] = {}
    for name, locked in sorted(lock.packs.items()):
        before = len(cache.fetched)
        folder = cache.install(locked, repositories)
        if on_fetch is not None and len(cache.fetched) > before:
            on_fetch(fetched_message(locked))
        packs[name] = _open_locked(name, locked, folder)
    return packs


def lock_pipeline(
    pipeline: Path,
    manifest: PipelineManifest | None = None,
    *,
    cache: PackCache | None = None,
    client: httpx.Client | None = None,
    warn: Callable[[str], object] | None = None,
    allow_downgrade: bool = False,
    repin: bool = False,
    upgrade: Collection[str] | None = None,
    tool_factory: ServerFactory | None = None,
    environ: Mapping[str, str] | None = None,
) -> LockFile:
    """Resolve, fetch, verify and write the pipeline's lock section; returns it.

    The section also pins each MCP tool server the pipeline declares
    (`_tool_lock.lock_tool_servers`: each started, read and stopped; made by
    `tool_factory`, default the `mcp` SDK's, in `environ`, default the process's), and
    each tool server of its packs that its `trust:` lists, once the packs are fetched
    (started in the pack's folder, `PACK/SERVER`); one that does not start fails the
    lock before anything is written.

    Versions pinned by a readable previous lock are kept when they still fit,
    except those of the packs named in `upgrade` (all of them when it is
    empty), which move to the newest live version that fits; a name that is
    no pack of the pipeline or its lock is a `UsageError`. `warn` hears that an
    unreadable lock file is being replaced, and, once the lock is written, each
    kept pin that is yanked (CD572) and each pin a newer fitting version could
    replace (CD577), as `Notice`s with the command that moves it. A pin that
    would move to a lower version (unless `allow_downgrade`) or to another
    digest for the same version (unless `repin`) is refused before anything
    is fetched or written (`_trust.check_pin_moves`).
    """
    from converge_dsl.packs._resolve import resolve
    from converge_dsl.packs._signing import verify
    from converge_dsl.packs._trust import check_pin_moves

    info = PipelinePacks.read(pipeline, manifest)
    repositories = info.open(client)
    previous = None
    with contextlib.suppress(PackError):  # an unreadable lock is replaced (write_lock warns)
        previous = read_lock(pipeline)
    kept = _kept_pins(info, previous, upgrade)
    try:
        resolved = resolve(
            info.specifiers(),
            list(repositories.values()),
            requester=info.requester,
            locked=kept,
        )
    except PackRefused as exc:
        exc.where = _where_asked(pipeline, exc.packs)
        raise
    for pinned in resolved.values():
        entry = pinned.entry
        signature = dict(entry.signature) if entry.signature else None
        keys = repositories[pinned.repository].trusted_keys
        verify(signature, keys, pinned.name, str(entry.version), entry.sha256)
    lock = lock_from_resolution(info.packs, info.repositories, resolved)
    if previous is not None:
        check_pin_moves(
            previous,
            lock,
            allow_downgrade=allow_downgrade,
            repin=repin,
            index_of=lambda where, name: _index_of(repositories, where, name),
            command=lock_hint(pipeline).removeprefix("run: "),
            moving=set(upgrade or ()),  # named packs only: `--upgrade` alone moves none down
        )
    packs = _install_all(lock, repositories, cache or PackCache())
    lock = replace(lock, tools=_lock_tools(pipeline, info, packs, tool_factory, environ))
    write_lock(pipeline, lock, warn=warn)
    if warn is not None:
        for notice in _pin_notices(pipeline, info, resolved.values(), repositories):
            warn(notice)
    return lock


def _lock_tools(
    pipeline: Path,
    info: PipelinePacks,
    packs: Mapping[str, Pack],
    factory: ServerFactory | None,
    environ: Mapping[str, str] | None,
) -> dict[str, LockedServer]:
    """The pipeline's tool servers and the trusted servers of its fetched packs, each
    started (a pack's in its folder), read and stopped."""
    from converge_dsl.packs._tool_lock import lock_tool_servers

    tools = lock_tool_servers(pipeline, factory=factory, environ=environ)
    if info.trust:
        from converge_dsl.tools import real_server

        parent = dict(os.environ if environ is None else environ)
        tools |= lock_pack_servers(packs, info.trust, factory or real_server, parent)
    return tools


def _where_asked(pipeline: Path, packs: Sequence[str]) -> str | None:
    """`FILE:LINE:COLUMN` of the first of `packs` the pipeline's `packs:` names."""
    try:
        doc = load_document(pipeline)
    except (PackError, PipelineInvalid):
        return None
    shown = pipeline.name if pipeline.is_absolute() else pipeline.as_posix()
    for name in packs:
        with contextlib.suppress(KeyError, LookupError):
            span = doc.source_map.span(("packs", name))
            return f"{shown}:{span.line}:{span.column}"
    return None


def _kept_pins(
    info: PipelinePacks, previous: LockFile | None, upgrade: Collection[str] | None
) -> dict[str, Version] | None:
    """The previous lock's pins that re-locking keeps (all but the upgraded packs)."""
    known = set(info.packs) | set(previous.packs if previous else ())
    for name in upgrade or ():
        if name not in known:
            close = did_you_mean(name, known)
            raise UsageError(
                f"lock --upgrade {name}: the pipeline has no pack {name!r}",
                hint=suggestion(close)
                if close
                else f"its packs: {', '.join(sorted(known)) or 'none'}",
                code=codes.ARGUMENTS_REFUSED,
            )
    if previous is None:
        return None
    pins = previous.versions()
    if upgrade is None:
        return pins
    return {} if not upgrade else {n: v for n, v in pins.items() if n not in set(upgrade)}


def _pin_notices(
    pipeline: Path,
    info: PipelinePacks,
    resolved: Iterable[Resolved],
    repositories: Mapping[str, Repository],
) -> Iterator[str]:
    """CD572 for each yanked pin the lock kept, CD577 for each pin a newer version fits."""
    from converge_dsl.packs._trust import newer_version_notice, newest_live, yanked_pin_notice

    command = lock_hint(pipeline).removeprefix("run: ")
    for pinned in resolved:
        name, version = pinned.name, pinned.entry.version
        requested = info.packs.get(name)
        index = _index_of(repositories, pinned.repository, name)
        if pinned.entry.yanked:  # only a pin the previous lock held can be yanked
            yield yanked_pin_notice(
                name,
                str(version),
                repository=pinned.repository,
                specifier=requested,
                command=command,
                index=index,
            )
        elif requested is not None and index is not None:
            newest = newest_live(index, requested)
            if newest is not None and newest > version:
                yield newer_version_notice(
                    name, str(version), newest, specifier=requested, command=command
                )


def _index_of(repositories: Mapping[str, Repository], where: str, name: str) -> PackIndex | None:
    """The index of `name` in repository `where` (None if it is not listed or lacks it)."""
    repository = repositories.get(where)
    if repository is None:
        return None
    with contextlib.suppress(PackError):
        return repository.fetch_index(name)
    return None


def _current_lock(info: PipelinePacks) -> LockFile | None:
    """The pipeline's lock section (None: no packs); `PackError` if missing or stale."""
    if not info.packs:
        return None
    problems = lock_problems(info.path, info.packs, info.repositories)
    if problems:
        hint = missing_repository_hint(info.path, info.repositories) or lock_hint(info.path)
        raise PackRefused(problems[0][0], "; ".join(message for _, message in problems), hint=hint)
    lock = read_lock(info.path)
    assert lock is not None  # lock_problems reported a missing lock
    return lock


def load_locked_packs(
    pipeline: Path,
    manifest: PipelineManifest | None = None,
    *,
    cache: PackCache | None = None,
    client: httpx.Client | None = None,
    on_fetch: Callable[[str], object] | None = None,
) -> dict[str, Pack]:
    """The pipeline's packs as pinned by its lock; raises `PackError` if missing or stale.

    Packs the cache lacks are fetched and verified; `on_fetch` hears one line
    (`fetched_message`) per pack actually downloaded.
    """
    info = PipelinePacks.read(pipeline, manifest)
    lock = _current_lock(info)
    if lock is None:
        return {}
    return _install_all(lock, info.open(client), cache or PackCache(), on_fetch)


# The trusted servers last read per pipeline file: (its lock's bytes, trust, the servers).
_READ: dict[str, tuple[bytes | None, object, dict[str, PackServer]]] = {}
_KEEP = 8


def trusted_pack_servers(
    pipeline: Path, manifest: PipelineManifest, *, environ: Mapping[str, str] | None = None
) -> dict[str, PackServer]:
    """The trusted servers of the pipeline's locked packs ({} without `trust:`), each with
    its pack's pin in the lock; read once per lock file (a batch's runs share them). A
    pack the cache lacks is fetched (into the pack cache of `environ`, default: the
    process's environment)."""
    if not manifest.trust:
        return {}
    lock = lock_bytes(pipeline)
    trust = dict(manifest.trust)
    kept = _READ.get(str(pipeline))
    if kept is not None and kept[0] == lock and kept[1] == trust:
        return kept[2]
    packs = load_locked_packs(pipeline, manifest, cache=PackCache(environ=environ))
    pinned = read_lock(pipeline)
    pins = {
        name: {"version": locked.version, "sha256": locked.sha256}
        for name, locked in ({} if pinned is None else pinned.packs).items()
    }
    servers = pack_servers(packs, trust, pins)
    if len(_READ) >= _KEEP:
        _READ.clear()
    _READ[str(pipeline)] = (lock, trust, servers)
    return servers


def fetch_hint(pipeline: Path) -> str:
    """The command that fetches a pipeline's locked packs, naming it as the user does."""
    shown = pipeline.name if pipeline.is_absolute() else pipeline.as_posix()
    return f"run: converge-dsl pack fetch {shown}"


def read_locked_packs(
    pipeline: Path,
    manifest: PipelineManifest | None = None,
    *,
    cache: PackCache | None = None,
    shown: Path | None = None,
) -> tuple[dict[str, Pack], list[LockedPack]]:
    """The pinned packs the cache holds, and the pinned packs it lacks, in name order.

    Read-only: never touches the network, never writes the cache. Raises
    `PackError` for a missing or stale lock, a pack from a repository the
    pipeline no longer lists, a bad signature, or an altered unpacked folder.
    `shown` names the pipeline in hints (default: `pipeline`).
    """
    info = PipelinePacks.read(pipeline, manifest)
    lock = _current_lock(info)
    if lock is None:
        return {}, []
    cache = cache or PackCache()
    keys = repository_keys(info.repositories)
    found: dict[str, Pack] = {}
    missing: list[LockedPack] = []
    for name, locked in sorted(lock.packs.items()):
        if locked.repository not in keys:
            raise PackRefused(
                codes.LOCK_STALE,
                f"{locked.name} {locked.version} comes from {locked.repository}, "
                "which the pipeline no longer lists",
                hint="re-run converge-dsl lock",
            )
        fix = fetch_hint(shown or pipeline)
        folder = cache.find(locked, keys[locked.repository], fix=fix)
        if folder is None:
            missing.append(locked)
        else:
            found[name] = _open_locked(name, locked, folder)
    return found, missing


def yanked_pins(
    pipeline: Path, manifest: PipelineManifest | None = None, *, shown: Path | None = None
) -> list[tuple[str, Notice]]:
    """(pack name, CD572 notice) for each pin of the lock that its repository has yanked.

    Only repositories read without the network are asked (folders and
    `builtin`), each index within its byte cap; one that cannot be read says
    nothing here (`lock` and `pack verify` report it). `shown` names the
    pipeline in the hint (`lock --upgrade NAME`; default: `pipeline`).
    """
    from packaging.version import Version as parse_version

    from converge_dsl.packs._trust import yanked_pin_notice

    info = PipelinePacks.read(pipeline, manifest)
    lock = _current_lock(info)
    if lock is None:
        return []
    local = {
        repository.id: repository
        for spec in info.repositories or (BUILTIN,)
        if not (isinstance(spec, Mapping) and "url" in spec)
        for repository in (open_repository(spec, pipeline.parent),)
    }
    command = lock_hint(shown or pipeline).removeprefix("run: ")
    found: list[tuple[str, Notice]] = []
    for name, locked in sorted(lock.packs.items()):
        repository = local.get(locked.repository)
        index = None
        if repository is not None:
            with contextlib.suppress(PackError):
                index = repository.fetch_index(name)
        entry = index.entry(parse_version(locked.version)) if index is not None else None
        if entry is not None and entry.yanked:
            notice = yanked_pin_notice(
                name,
                locked.version,
                repository=locked.repository,
                specifier=info.packs.get(name),
                command=command,
                index=index,
            )
            found.append((name, notice))
    return found


def repository_keys(specs: Sequence[object]) -> dict[str, tuple[str, ...]]:
    """Repository id -> trusted keys of a pipeline's `repositories:`, without opening any.

    The ids are those `open_repositories` gives (`builtin`, `path:LABEL`,
    `url:URL`); nothing is imported or connected.
    """
    keys: dict[str, tuple[str, ...]] = {}
    for spec in specs or ["builtin"]:
        if isinstance(spec, Mapping) and "path" in spec:
            keys[f"path:{spec['path']}"] = tuple(spec.get("trusted_keys") or ())
        elif isinstance(spec, Mapping) and "url" in spec:
            keys[f"url:{str(spec['url']).rstrip('/')}"] = tuple(spec.get("trusted_keys") or ())
        elif spec == "builtin":
            keys["builtin"] = ()
    return keys
