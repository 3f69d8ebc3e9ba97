"""Packs as a pipeline sees them: lock a pipeline, load its locked packs.

`lock_pipeline` resolves the pipeline's `packs:` against its `repositories:`,
fetches and verifies every pinned archive into the cache (so the next run
works offline) and writes the pipeline's section of `converge.lock` beside it
(`lock_path`); an unreadable lock file is replaced, with a warning.
`load_locked_packs` is what `validate` and `run` call: it refuses a missing or
stale lock with the reason and the command that fixes it, then installs each
pinned pack from the cache (downloading only what is missing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.specifiers import SpecifierSet

from converge_dsl.errors import PackError
from converge_dsl.packs._cache import PackCache
from converge_dsl.packs._lockfile import (
    LockFile,
    lock_from_resolution,
    lock_hint,
    lock_problems,
    missing_repository_hint,
    read_lock,
    write_lock,
)
from converge_dsl.packs._manifest import Pack, load_pack, parse_specifier
from converge_dsl.packs._repository import Repository, open_repositories
from converge_dsl.packs._yaml import load_document

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True, slots=True)
class PipelinePacks:
    """The pack-related fields of a pipeline file."""

    path: Path
    name: str
    packs: Mapping[str, str]
    repositories: tuple[Any, ...]

    @classmethod
    def read(cls, path: Path, data: Mapping[str, Any] | None = None) -> PipelinePacks:
        if data is None:
            loaded = load_document(path).data
            data = loaded if isinstance(loaded, Mapping) else {}
        return cls(
            path=path,
            name=str(data.get("name", path.stem)),
            packs={str(k): str(v) for k, v in (data.get("packs") or {}).items()},
            repositories=tuple(data.get("repositories") or ()),
        )

    @property
    def requester(self) -> str:
        return f"pipeline {self.name!r}"

    def specifiers(self) -> dict[str, SpecifierSet]:
        out: dict[str, SpecifierSet] = {}
        for name, text in self.packs.items():
            spec = parse_specifier(text)
            if spec is None:
                raise PackError(f"packs.{name}: {text!r} is not a PEP 440 specifier")
            out[name] = spec
        return out

    def open(self, client: httpx.Client | None = None) -> dict[str, Repository]:
        repositories = open_repositories(self.repositories, self.path.parent, client)
        return {r.id: r for r in repositories}


def _install_all(
    lock: LockFile, repositories: Mapping[str, Repository], cache: PackCache
) -> dict[str, Pack]:
    packs: dict[str, Pack] = {}
    for name, locked in sorted(lock.packs.items()):
        folder = cache.install(locked, repositories)
        pack = load_pack(folder, display=f"{name}-{locked.version}")
        if pack.name != name or str(pack.version) != locked.version:
            raise PackError(
                f"the archive locked as {name} {locked.version} holds {pack.name} {pack.version}"
            )
        packs[name] = pack
    return packs


def lock_pipeline(
    pipeline: Path,
    data: Mapping[str, Any] | None = None,
    *,
    cache: PackCache | None = None,
    client: httpx.Client | None = None,
    warn: Callable[[str], object] | None = None,
) -> LockFile:
    """Resolve, fetch, verify and write the pipeline's lock section; returns it.

    Versions pinned by a readable previous lock are kept when they still fit;
    `warn` hears that an unreadable lock file is being replaced.
    """
    from converge_dsl.packs._resolve import resolve
    from converge_dsl.packs._signing import verify

    info = PipelinePacks.read(pipeline, data)
    repositories = info.open(client)
    previous = None
    with contextlib.suppress(PackError):  # an unreadable lock is replaced (write_lock warns)
        previous = read_lock(pipeline)
    resolved = resolve(
        info.specifiers(),
        list(repositories.values()),
        requester=info.requester,
        locked=previous.versions() if previous else None,
    )
    for pinned in resolved.values():
        entry = pinned.entry
        signature = dict(entry.signature) if entry.signature else None
        keys = repositories[pinned.repository].trusted_keys
        verify(signature, keys, pinned.name, str(entry.version), entry.sha256)
    lock = lock_from_resolution(info.packs, info.repositories, resolved)
    _install_all(lock, repositories, cache or PackCache())
    write_lock(pipeline, lock, warn=warn)
    return lock


def load_locked_packs(
    pipeline: Path,
    data: Mapping[str, Any] | None = None,
    *,
    cache: PackCache | None = None,
    client: httpx.Client | None = None,
) -> dict[str, Pack]:
    """The pipeline's packs as pinned by its lock; raises `PackError` if missing or stale."""
    info = PipelinePacks.read(pipeline, data)
    if not info.packs:
        return {}
    problems = lock_problems(pipeline, info.packs, info.repositories)
    if problems:
        hint = missing_repository_hint(pipeline, info.repositories) or lock_hint(pipeline)
        raise PackError("; ".join(message for _, message in problems), hint=hint)
    lock = read_lock(pipeline)
    assert lock is not None  # lock_problems reported a missing lock
    return _install_all(lock, info.open(client), cache or PackCache())
