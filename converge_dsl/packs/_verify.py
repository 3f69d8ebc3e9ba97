"""`pack verify PIPELINE`: every locked pack against its repository, the lock and the cache.

`verify_pipeline(pipeline)` first refuses a missing or stale lock (as `run`
does), then checks each pinned pack and reports every finding, not just the
first:

- the repository's index still lists the pinned version with the locked
  digest (CD571 otherwise) and, when the repository has trusted keys, a valid
  signature; a version yanked since locking is a warning (CD572);
- the archive the repository serves has the locked digest (CD570 otherwise:
  altered or re-published after locking);
- the pack cache holds the verified archive and an unpacked copy that still
  matches it (an altered copy is reported and re-installed, as before), and
  the archive holds the pack the lock names.

The archive is downloaded once: the cache installs from the bytes the
repository check fetched. With `offline`, the repository is not asked at all
and the cache is only read (`PackCache.find`): a pinned pack it lacks is a
finding. A repository that cannot be reached is a finding for each of its
packs, never a traceback. Nothing here writes the lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.errors import PackError, PipelineInvalid
from converge_dsl.packs._cache import PackCache
from converge_dsl.packs._index import PackIndex
from converge_dsl.packs._lockfile import LockedPack, lock_hint
from converge_dsl.packs._manifest import parse_version
from converge_dsl.packs._repository import Repository
from converge_dsl.packs._trust import yanked_pin_notice
from converge_dsl.packs._workspace import (
    PipelinePacks,
    _current_lock,
    _open_locked,
    fetch_hint,
)

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem or warning about a pinned pack; `code` None when it has none."""

    code: str | None
    message: str
    hint: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


@dataclass(frozen=True, slots=True)
class PackVerdict:
    """What `pack verify` found for one pinned pack; `checked` names what was compared."""

    name: str
    version: str
    repository: str
    checked: tuple[str, ...]
    problems: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "repository": self.repository,
            "ok": self.ok,
            "checked": list(self.checked),
            "problems": [p.as_json() for p in self.problems],
            "warnings": [w.as_json() for w in self.warnings],
        }


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Every pinned pack's verdict, in name order."""

    verdicts: tuple[PackVerdict, ...]
    offline: bool = False

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "offline": self.offline,
            "packs": [v.as_json() for v in self.verdicts],
        }


def _finding(exc: PackError, prefix: str = "") -> Finding:
    return Finding(getattr(exc, "code", None), prefix + exc.message, exc.hint)


@dataclass
class _Remembering:
    """A repository that keeps the archives it fetched, so the cache installs the same bytes."""

    inner: Repository
    archives: dict[tuple[str, str], bytes] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.inner.id

    @property
    def trusted_keys(self) -> tuple[str, ...]:
        return self.inner.trusted_keys

    @property
    def index_bytes_fetched(self) -> int:
        return self.inner.index_bytes_fetched

    def fetch_index(self, name: str) -> PackIndex | None:
        return self.inner.fetch_index(name)

    def fetch_archive(self, name: str, version: str) -> bytes:
        key = (name, version)
        if key not in self.archives:
            self.archives[key] = self.inner.fetch_archive(name, version)
        return self.archives[key]

    def names(self) -> list[str]:
        return self.inner.names()


class _Check:
    """The checks of one pinned pack, collecting findings."""

    def __init__(self, locked: LockedPack, pipeline: Path, packs: Mapping[str, str]) -> None:
        self.locked = locked
        self.pipeline = pipeline
        self.packs = packs
        self.label = f"{locked.name} {locked.version}"
        self.problems: list[Finding] = []
        self.warnings: list[Finding] = []
        self.checked: list[str] = []

    def problem(self, code: str | None, message: str, hint: str | None = None) -> None:
        self.problems.append(Finding(code, f"{self.label}: {message}", hint))

    def index(self, repository: Repository) -> None:
        from converge_dsl.packs._signing import verify

        locked = self.locked
        try:
            index = repository.fetch_index(locked.name)
        except PackError as exc:
            self.problems.append(_finding(exc, f"{self.label}: cannot read its index: "))
            return
        entry = None
        if index is not None:
            version = parse_version(locked.version)
            entry = None if version is None else index.entry(version)
        relock = lock_hint(self.pipeline)
        if entry is None:
            self.problem(
                codes.REPOSITORY_INDEX_MISMATCH,
                f"the index of {repository.id} no longer lists this version",
                hint="ask the repository owner; to move to a version it lists, "
                f"{relock} --allow-downgrade",
            )
            return
        self.checked.append("index")
        if entry.sha256 != locked.sha256:
            self.problem(
                codes.REPOSITORY_INDEX_MISMATCH,
                f"the index of {repository.id} lists sha256 {entry.sha256[:16]}... for it, "
                f"the lock pins {locked.sha256[:16]}...",
                hint="a published version never changes: ask the repository owner; if the "
                f"new archive is expected, {relock} --repin",
            )
        if repository.trusted_keys:
            signature = dict(entry.signature) if entry.signature else None
            try:
                verify(
                    signature, repository.trusted_keys, locked.name, locked.version, entry.sha256
                )
            except PackError as exc:
                self.problems.append(_finding(exc, f"{self.label}: in the index: "))
        if entry.yanked:
            command = relock.removeprefix("run: ")
            notice = yanked_pin_notice(
                locked.name,
                locked.version,
                repository=repository.id,
                specifier=self.packs.get(locked.name),
                command=command,
                index=index,
            )
            self.warnings.append(Finding(notice.code, str(notice), notice.hint))

    def archive(self, repository: Repository) -> bool:
        """Whether the repository's archive has the locked digest (False: a finding)."""
        from converge_dsl.packs._archive import sha256_hex

        locked = self.locked
        try:
            data = repository.fetch_archive(locked.name, locked.version)
        except PackError as exc:
            self.problems.append(_finding(exc, f"{self.label}: cannot read its archive: "))
            return False
        actual = sha256_hex(data)
        if actual != locked.sha256:
            self.problem(
                codes.REPOSITORY_ARCHIVE_MISMATCH,
                f"the archive in {repository.id} has sha256 {actual[:16]}..., the lock pins "
                f"{locked.sha256[:16]}...: it was altered or re-published after locking",
                hint="ask the repository owner; runs keep using the verified copy in the "
                "pack cache, if there is one",
            )
            return False
        self.checked.append("archive")
        return True

    def cache(
        self,
        cache: PackCache,
        repositories: Mapping[str, Repository] | None,
        trusted_keys: tuple[str, ...],
        *,
        report_missing: bool = True,
    ) -> None:
        """The cache's copy: installed (repaired) from `repositories`, or only read (None).

        `report_missing` False: a pack the cache lacks is no finding of its own
        (its archive was already reported).
        """
        locked = self.locked
        try:
            if repositories is None:
                found = cache.find(locked, trusted_keys, fix=fetch_hint(self.pipeline))
                if found is None:
                    if not report_missing:
                        return
                    self.problem(
                        codes.PACK_NOT_FETCHED,
                        "it is not in the pack cache",
                        hint=fetch_hint(self.pipeline),
                    )
                    return
                folder = found
            else:
                folder = cache.install(locked, repositories)
            _open_locked(locked.name, locked, folder)
        except PackError as exc:
            self.problems.append(_finding(exc))
            return
        except PipelineInvalid as exc:
            self.problem(None, f"the locked archive holds an invalid pack: {exc.message}")
            return
        if self.label in cache.repaired:
            self.problems.append(
                Finding(
                    None,
                    f"the unpacked copy of {self.label} in the pack cache did not match its "
                    "locked archive (altered); it was re-installed from the verified archive",
                )
            )
        self.checked.append("cache")

    def verdict(self) -> PackVerdict:
        return PackVerdict(
            self.locked.name,
            self.locked.version,
            self.locked.repository,
            tuple(self.checked),
            tuple(self.problems),
            tuple(self.warnings),
        )


def verify_pipeline(
    pipeline: Path,
    *,
    cache: PackCache | None = None,
    client: httpx.Client | None = None,
    offline: bool = False,
) -> VerifyReport:
    """Verify every locked pack of `pipeline` (see the module docstring).

    Raises `PackError` only for a missing, stale or unreadable lock or a
    pipeline whose repositories cannot be opened; each pack's problems are
    findings of the report.
    """
    from converge_dsl.packs._workspace import repository_keys

    info = PipelinePacks.read(pipeline)
    lock = _current_lock(info)
    if lock is None:
        return VerifyReport((), offline)
    cache = cache or PackCache()
    keys = repository_keys(info.repositories)
    repositories = {} if offline else info.open(client)
    remembering = {rid: _Remembering(r) for rid, r in repositories.items()}
    verdicts = []
    for _, locked in sorted(lock.packs.items()):
        check = _Check(locked, pipeline, info.packs)
        if locked.repository not in keys:
            check.problem(
                None,
                f"it comes from {locked.repository}, which the pipeline no longer lists",
                hint=lock_hint(pipeline),
            )
        elif offline:
            check.cache(cache, None, keys[locked.repository])
        else:
            repository = remembering[locked.repository]
            check.index(repository)
            if check.archive(repository):
                check.cache(cache, dict(remembering), repository.trusted_keys)
            else:  # the cache may still hold the verified copy: read it, never replace it
                check.cache(cache, None, repository.trusted_keys, report_missing=False)
        verdicts.append(check.verdict())
    return VerifyReport(tuple(verdicts), offline)
