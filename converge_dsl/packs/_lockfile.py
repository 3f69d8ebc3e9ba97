"""The lock file: the exact pack versions and digests each pipeline runs with.

One `converge.lock` per folder, beside its pipelines, holds a section per
pipeline file name, so a folder of pipelines with different packs or
repositories shares one file but never one resolution. `lock`, `validate`,
`run` and `pack add` all find it through `lock_path`; `lock PIPELINE` replaces
only that pipeline's section (atomically: temporary file, fsync, rename),
leaving the other sections byte-for-byte as they were. The read-modify-write
holds an exclusive advisory lock (`flock`) on the lock file's folder (which
leaves no file behind), so concurrent `lock` / `pack add` runs in one folder never lose each other's
sections; a run that cannot get it within `LOCK_WAIT_S` stops with a PackError.

The lock is JSON, written with sorted keys so it diffs well:

    {"lock-version": 1,
     "pipelines": {
       "staffing-plan.yaml": {
         "pipeline": {"packs": {"optimization": ">=1,<2"}, "repositories": ["builtin"]},
         "packs": {"optimization": {"version": "1.0.0", "sha256": "...",
                                    "repository": "builtin", "requires": {},
                                    "requested-by": ["pipeline 'demo'"], "signature": null}},
         "tools": {"time": {"transport": {"transport": "stdio", "command": [...], ...},
                            "server": {"name": "mcp-time", "version": "1.9.4"},
                            "digest": "sha256:...",
                            "tools": [{"name": "convert_time", "description": "...",
                                       "input_schema": {...}}]}}}}}

`tools` (present when the pipeline declares tool servers) pins each MCP server
as `lock` found it (`converge_dsl.tools.LockedServer`, docs/tools.md).

`pipeline` records the inputs a section was resolved from, so `stale_reasons`
can say precisely what changed since (a pack added, a specifier edited, the
repositories changed) instead of a bare "hash mismatch". A lock file that
cannot be read (empty, not JSON, merge-conflict markers, an unknown format)
never blocks `lock`: it is replaced, with a warning.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import Version

from converge_dsl import codes
from converge_dsl._reading import read_bytes
from converge_dsl.errors import PackError
from converge_dsl.packs._files import SHA256, PackRefused, parse_json, write_atomic
from converge_dsl.packs._index import SAFE_NAME
from converge_dsl.packs._manifest import parse_specifier, parse_version
from converge_dsl.tools import LockedServer

if TYPE_CHECKING:
    from converge_dsl.packs._resolve import Resolved

LOCK_FILE = "converge.lock"
LOCK_VERSION = 1
LOCK_WAIT_S = 30.0  # how long a writer waits for another writer of the same lock file
_POLL_S = 0.05
_CONFLICT = re.compile(rb"^<{7}(?: |$)", re.MULTILINE)  # git's merge-conflict marker


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
    """One pipeline's section of `converge.lock`."""

    packs_requested: Mapping[str, str]
    repositories: tuple[object, ...]
    packs: Mapping[str, LockedPack]
    tools: Mapping[str, LockedServer] = field(default_factory=dict)

    def versions(self) -> dict[str, Version]:
        return {n: Version(p.version) for n, p in self.packs.items()}

    def as_json(self) -> dict[str, Any]:
        section: dict[str, Any] = {
            "pipeline": {
                "packs": dict(self.packs_requested),
                "repositories": list(self.repositories),
            },
            "packs": {name: self.packs[name].as_json() for name in sorted(self.packs)},
        }
        if self.tools:
            section["tools"] = {name: self.tools[name].as_json() for name in sorted(self.tools)}
        return section


def lock_from_resolution(
    packs_requested: Mapping[str, str],
    repositories: Sequence[object],
    resolved: Mapping[str, Resolved],
    tools: Mapping[str, LockedServer] | None = None,
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
    return LockFile(dict(packs_requested), tuple(repositories), pinned, dict(tools or {}))


def lock_path(pipeline: Path) -> Path:
    """The lock file of `pipeline`: `converge.lock` in its folder."""
    return pipeline.parent / LOCK_FILE


def lock_hint(pipeline: Path) -> str:
    """The command that (re)writes the lock, naming the pipeline as the user does."""
    shown = pipeline.name if pipeline.is_absolute() else pipeline.as_posix()
    return f"run: converge-dsl lock {shown}"


def missing_repository_hint(pipeline: Path, repositories: Sequence[object]) -> str | None:
    """A hint naming the first folder repository of `pipeline` that does not exist.

    `lock` would fail on it, so `lock_hint` would send the user in a circle.
    """
    for spec in repositories:
        if isinstance(spec, Mapping) and "path" in spec:
            folder = str(spec["path"])
            if not (pipeline.parent / folder).is_dir():
                return (
                    f"repository {folder} does not exist (paths under repositories: are "
                    "relative to the pipeline file); fix repositories:, then lock again"
                )
    return None


def _read_sections(path: Path) -> dict[str, Any]:
    """Every pipeline's raw section of the lock at `path`; {} when there is no lock.

    Raises `PackError` when the file cannot be read or is not a lock file.
    """
    try:
        data = read_bytes(path, "lock file")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise PackRefused(
            codes.LOCK_STALE, f"{path.name} is unreadable: {exc.strerror or exc}"
        ) from None
    if _CONFLICT.search(data):
        raise PackRefused(
            codes.LOCK_STALE, f"{path.name} is unreadable: it holds merge-conflict markers"
        )
    body = parse_json(data, f"{path.name} is unreadable", codes.LOCK_STALE)
    version = body.get("lock-version") if isinstance(body, dict) else None
    # `type(...) is int`: JSON's true is a Python int equal to 1, and 1.0 equals it too.
    if type(version) is not int or version != LOCK_VERSION:
        raise PackRefused(
            codes.LOCK_STALE,
            f"{path.name} is unreadable: not a lock-version {LOCK_VERSION} lock file"
            + ("" if version is None else f" (its lock-version is {_shown(version)})"),
        )
    sections = body.get("pipelines")
    if not isinstance(sections, dict):
        raise PackRefused(
            codes.LOCK_STALE, f"{path.name} is unreadable: it has no 'pipelines' object"
        )
    return sections


def _shown(value: Any) -> str:
    """A JSON value as the lock has it, a container or long text only by its kind."""
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else "a long text"


def _is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _folder(path: Path) -> str:
    return f"{path.name} is a folder, not a lock file"


def _strings(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())


def _locked_pack(name: str, raw: Any, where: str) -> LockedPack:
    problem = None
    if not SAFE_NAME.match(name):
        problem = "it is not a pack name"
    elif not isinstance(raw, dict):
        problem = "it is not an object"
    elif not isinstance(raw.get("version"), str) or parse_version(raw["version"]) is None:
        problem = "'version' is not a version"
    elif not isinstance(raw.get("sha256"), str) or not SHA256.match(raw["sha256"]):
        problem = "'sha256' is not a sha256 digest"
    elif not isinstance(raw.get("repository"), str):
        problem = "'repository' is not text"
    elif not _strings(raw.get("requires") or {}):
        problem = "'requires' is not an object of specifiers"
    elif not isinstance(raw.get("requested-by") or [], list) or not all(
        isinstance(r, str) for r in raw.get("requested-by") or []
    ):
        problem = "'requested-by' is not a list of text"
    elif raw.get("signature") is not None and not _strings(raw["signature"]):
        problem = "'signature' is not an object {key, signature}"
    if problem is not None:
        raise PackRefused(
            codes.LOCK_STALE, f"{where}: the entry of pack {name!r} is malformed: {problem}"
        )
    return LockedPack(
        name=name,
        version=raw["version"],
        sha256=raw["sha256"],
        repository=raw["repository"],
        requires=dict(raw.get("requires") or {}),
        requested_by=tuple(raw.get("requested-by") or ()),
        signature=raw.get("signature"),
    )


def _section(raw: Any, where: str) -> LockFile:
    pipeline = raw.get("pipeline") if isinstance(raw, dict) else None
    packs = raw.get("packs") if isinstance(raw, dict) else None
    tools = raw.get("tools") if isinstance(raw, dict) else None
    if (
        not isinstance(pipeline, dict)
        or not _strings(pipeline.get("packs") or {})
        or not isinstance(pipeline.get("repositories") or [], list)
        or not isinstance(packs or {}, dict)
        or not isinstance(tools or {}, dict)
    ):
        raise PackRefused(codes.LOCK_STALE, f"{where} is malformed")
    return LockFile(
        dict(pipeline.get("packs") or {}),
        tuple(pipeline.get("repositories") or ()),
        {str(n): _locked_pack(str(n), p, where) for n, p in (packs or {}).items()},
        {str(n): _locked_tools(str(n), s, where) for n, s in (tools or {}).items()},
    )


def _locked_tools(name: str, raw: Any, where: str) -> LockedServer:
    try:
        return LockedServer.from_json(name, raw)
    except ValueError as exc:
        raise PackRefused(
            codes.LOCK_STALE, f"{where}: the entry of tool server {name!r} is malformed: {exc}"
        ) from None


def read_lock(pipeline: Path) -> LockFile | None:
    """The lock section of `pipeline`, None when there is none.

    Raises `PackError` when the lock file or the section is unreadable.
    """
    path = lock_path(pipeline)
    raw = _read_sections(path).get(pipeline.name)
    if raw is None:
        return None
    return _section(raw, f"{path.name}: the section of {pipeline.name}")


@contextlib.contextmanager
def exclusive(
    path: Path,
    *,
    wait_s: float | None = None,
    subject: str | None = None,
    writer: str = "another converge-dsl process",
    hint: str = "wait for the other lock or pack add to finish, then retry",
) -> Iterator[None]:
    """Hold an exclusive advisory lock for `path`: a `flock` on its folder.

    The folder itself is locked (opened read-only), so nothing is created
    beside the lock file and nothing is left behind; the lock file cannot
    carry the flock, since `write_atomic` replaces it with a new file. A
    `.NAME.lock` guard left by an older version is removed under the lock.
    Waits up to `wait_s` seconds (default `LOCK_WAIT_S`) for another holder;
    raises `PackError` after, saying `subject` (default: the file's name) is being
    written by `writer`, with `hint`.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        raise PackRefused(
            codes.PACK_FILE_NOT_WRITTEN, f"cannot lock {path.name}: {exc.strerror or exc}"
        ) from None
    try:
        _acquire(
            descriptor,
            path,
            LOCK_WAIT_S if wait_s is None else wait_s,
            f"{subject or path.name} is being written by {writer}",
            hint,
        )
        with contextlib.suppress(OSError):
            (path.parent / f".{path.name}.lock").unlink(missing_ok=True)
        yield
    finally:
        os.close(descriptor)  # closing releases the flock


def _acquire(descriptor: int, path: Path, wait_s: float, busy: str, hint: str) -> None:
    import fcntl

    give_up = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= give_up:
                raise PackRefused(
                    codes.LOCK_FILE_BUSY,
                    f"{busy}; gave up after {wait_s:g} s",
                    hint=hint,
                ) from None
            time.sleep(_POLL_S)
        except OSError as exc:
            raise PackRefused(
                codes.PACK_FILE_NOT_WRITTEN, f"cannot lock {path.name}: {exc.strerror or exc}"
            ) from None


def write_lock(
    pipeline: Path, lock: LockFile, *, warn: Callable[[str], object] | None = None
) -> None:
    """Replace `pipeline`'s section of its lock file, keeping every other section.

    An unreadable lock file is replaced (reported through `warn`). The whole
    read-modify-write runs under `exclusive(lock file)`.
    """
    path = lock_path(pipeline)
    if _is_folder(path):  # not replaced: it may hold anything
        raise PackRefused(
            codes.LOCK_STALE, _folder(path), hint="move it away, then run converge-dsl lock again"
        )
    with exclusive(path):
        try:
            sections = dict(_read_sections(path))
        except PackError as exc:
            sections = {}
            if warn is not None:
                warn(
                    f"{exc.message}; it is replaced (re-lock the other pipelines of its folder "
                    "if it held theirs)"
                )
        sections[pipeline.name] = lock.as_json()
        body = {"lock-version": LOCK_VERSION, "pipelines": sections}
        write_atomic(path, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def stale_reasons(
    lock: LockFile, packs_requested: Mapping[str, str], repositories: Sequence[object]
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
    pipeline: Path, packs_requested: Mapping[str, str], repositories: Sequence[object]
) -> list[tuple[str, str]]:
    """`(code, message)` for each reason the lock of `pipeline` cannot be used; [] if current.

    A pipeline without packs needs no lock. The hint for all of them is `lock_hint`
    (`lock` replaces an unreadable lock file).
    """
    if not packs_requested:
        return []
    path = lock_path(pipeline)
    try:
        lock = read_lock(pipeline)
    except PackError as exc:
        if _is_folder(path):
            return [
                (codes.LOCK_STALE, f"{_folder(path)}; move it away, then run converge-dsl lock")
            ]
        return [(codes.LOCK_STALE, f"{exc.message}; converge-dsl lock replaces it")]
    if lock is None:
        if not path.exists():
            return [(codes.LOCK_MISSING, f"{path.name} is missing: the pipeline uses packs")]
        return [
            (
                codes.LOCK_MISSING,
                f"{path.name} has no section for {pipeline.name}: the pipeline uses packs",
            )
        ]
    return [
        (codes.LOCK_STALE, f"{path.name} is stale for {pipeline.name}: {reason}")
        for reason in stale_reasons(lock, packs_requested, repositories)
    ]
