"""The lock file: the exact pack versions and digests a pipeline runs with.

Each pipeline has its own lock beside it, named after it (`staffing-plan.yaml`
-> `staffing-plan.lock`), as each manifest has its own lock in a package
manager: a folder of pipelines with different packs or repositories never
shares (and never overwrites) one lock. `lock`, `validate` and `run` all find
it through `lock_path`.

The lock is JSON, written with sorted keys so it diffs well:

    {"lock-version": 1,
     "pipeline": {"packs": {"optimization": ">=1,<2"}, "repositories": ["builtin"]},
     "packs": {"optimization": {"version": "1.0.0", "sha256": "...", "repository": "builtin",
                                "requires": {}, "requested-by": ["pipeline 'demo'"],
                                "signature": null}}}

`pipeline` records the inputs it was resolved from, so `stale_reasons` can say
precisely what changed since (a pack added, a specifier edited, the
repositories changed) instead of a bare "hash mismatch".
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from converge_dsl import codes
from converge_dsl.errors import PackError
from converge_dsl.packs._manifest import parse_specifier, parse_version

if TYPE_CHECKING:
    from converge_dsl.packs._resolve import Resolved

LOCK_SUFFIX = ".lock"
LOCK_VERSION = 1


@dataclass(frozen=True, slots=True)
class LockedPack:
    name: str
    version: str
    sha256: str
    repository: str
    requires: Mapping[str, str] = field(default_factory=dict)
    requested_by: tuple[str, ...] = ()
    signature: Mapping[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "sha256": self.sha256,
            "repository": self.repository,
            "requires": dict(sorted(self.requires.items())),
            "requested-by": list(self.requested_by),
            "signature": dict(self.signature) if self.signature else None,
        }


@dataclass(frozen=True, slots=True)
class LockFile:
    packs_requested: Mapping[str, str]
    repositories: tuple[Any, ...]
    packs: Mapping[str, LockedPack]

    def versions(self) -> dict[str, Version]:
        return {n: Version(p.version) for n, p in self.packs.items()}

    def to_text(self) -> str:
        body = {
            "lock-version": LOCK_VERSION,
            "pipeline": {
                "packs": dict(self.packs_requested),
                "repositories": list(self.repositories),
            },
            "packs": {name: self.packs[name].as_json() for name in sorted(self.packs)},
        }
        return json.dumps(body, indent=2, sort_keys=True) + "\n"


def lock_from_resolution(
    packs_requested: Mapping[str, str],
    repositories: Sequence[Any],
    resolved: Mapping[str, Resolved],
) -> LockFile:
    pinned = {
        name: LockedPack(
            name=name,
            version=str(r.entry.version),
            sha256=r.entry.sha256,
            repository=r.repository,
            requires={k: str(v) for k, v in r.entry.requires_packs.items()},
            requested_by=r.requested_by,
            signature=r.entry.signature,
        )
        for name, r in resolved.items()
    }
    return LockFile(dict(packs_requested), tuple(repositories), pinned)


def lock_path(pipeline: Path) -> Path:
    """The lock file of `pipeline`: beside it, `<pipeline stem>.lock`."""
    return pipeline.with_suffix(LOCK_SUFFIX)


def lock_hint(pipeline: Path) -> str:
    """The command that (re)writes the lock, naming the pipeline as the user does."""
    shown = pipeline.name if pipeline.is_absolute() else pipeline.as_posix()
    return f"run: converge-dsl lock {shown}"


def write_lock(path: Path, lock: LockFile) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(lock.to_text(), encoding="utf-8")
    os.replace(temporary, path)


def _locked_pack(name: str, raw: Any) -> LockedPack:
    if not isinstance(raw, dict) or parse_version(str(raw.get("version"))) is None:
        raise PackError(
            f"the lock entry for {name!r} is malformed", hint="re-run converge-dsl lock"
        )
    return LockedPack(
        name=name,
        version=str(raw["version"]),
        sha256=str(raw.get("sha256", "")),
        repository=str(raw.get("repository", "")),
        requires=dict(raw.get("requires") or {}),
        requested_by=tuple(raw.get("requested-by") or ()),
        signature=raw.get("signature"),
    )


def read_lock(path: Path) -> LockFile | None:
    """The lock at `path`, None when absent; raises `PackError` when malformed."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackError(
            f"{path.name} is unreadable: {exc}", hint="re-run converge-dsl lock"
        ) from None
    if not isinstance(body, dict) or body.get("lock-version") != LOCK_VERSION:
        raise PackError(f"{path.name} has an unknown format", hint="re-run converge-dsl lock")
    pipeline = body.get("pipeline") or {}
    packs = {n: _locked_pack(n, raw) for n, raw in (body.get("packs") or {}).items()}
    return LockFile(
        dict(pipeline.get("packs") or {}), tuple(pipeline.get("repositories") or ()), packs
    )


def stale_reasons(
    lock: LockFile, packs_requested: Mapping[str, str], repositories: Sequence[Any]
) -> Iterator[str]:
    """Why `lock` no longer matches the pipeline (nothing when it is current)."""
    for name, text in sorted(packs_requested.items()):
        pinned = lock.packs.get(name)
        if pinned is None:
            yield f"pack {name!r} is not locked"
            continue
        spec = parse_specifier(text)
        if spec is not None and not spec.contains(pinned.version, prereleases=True):
            yield f"the lock pins {name} {pinned.version}, which does not satisfy {text!r}"
        elif lock.packs_requested.get(name) != text:
            before = lock.packs_requested.get(name)
            yield f"the specifier of {name!r} changed from {before!r} to {text!r}"
    for name in sorted(set(lock.packs_requested) - set(packs_requested)):
        yield f"pack {name!r} is locked but no longer requested"
    if list(lock.repositories) != list(repositories):
        yield "the repositories changed since the lock was written"


def lock_problems(
    pipeline: Path, packs_requested: Mapping[str, str], repositories: Sequence[Any]
) -> list[tuple[str, str]]:
    """`(code, message)` for each reason the lock of `pipeline` cannot be used; [] if current.

    A pipeline without packs needs no lock. The hint for all of them is `lock_hint`.
    """
    if not packs_requested:
        return []
    path = lock_path(pipeline)
    try:
        lock = read_lock(path)
    except PackError as exc:
        return [(codes.LOCK_STALE, exc.message)]
    if lock is None:
        return [(codes.LOCK_MISSING, f"{path.name} is missing: the pipeline uses packs")]
    return [
        (codes.LOCK_STALE, f"{path.name} is stale: {reason}")
        for reason in stale_reasons(lock, packs_requested, repositories)
    ]
