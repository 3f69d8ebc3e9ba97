"""Publishing into a folder repository: `pack publish` and `pack yank`.

A pack is published only when it loads cleanly and every template and
expression of it compiles (`_lint.template_diagnostics`); otherwise
`PipelineInvalid` carries the diagnostics, located in the pack's files.
A published version is immutable: publishing the same version again is a
no-op when the archive digest is the same and an error when it differs.
`publish` returns a `Published` saying which happened and whether this call
signed the entry (`signed`), so `pack publish` prints "(signed)" only then, and
warns (CD575) when a `--sign-key` it was given went unused.
Files are written atomically (`write_atomic`), the archive before the index,
so a reader never sees an index entry whose archive is missing; one publish or
yank writes a repository at a time (a `flock` on its folder, as `lock` holds).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from packaging.version import Version

from converge_dsl import codes
from converge_dsl.diagnostics import best_first
from converge_dsl.errors import PipelineInvalid
from converge_dsl.packs._archive import build_archive, sha256_hex
from converge_dsl.packs._files import Notice, PackRefused, write_atomic
from converge_dsl.packs._index import (
    NAMES_FILE,
    IndexEntry,
    PackIndex,
    archive_path,
    index_path,
)
from converge_dsl.packs._lockfile import exclusive
from converge_dsl.packs._manifest import load_pack, parse_version
from converge_dsl.packs._repository import FolderRepository
from converge_dsl.packs._signing import sign


@dataclass(frozen=True, slots=True)
class Published:
    """What `publish` did with one pack version.

    `created` is False when the same archive was already published (nothing
    changed); `signed` is True only when this call signed the new entry;
    `key_given` whether a signing key was passed.
    """

    name: str
    entry: IndexEntry
    created: bool
    signed: bool
    key_given: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": str(self.entry.version),
            "sha256": self.entry.sha256,
            "created": self.created,
            "signed": self.signed,
        }

    def unused_key_notice(self) -> Notice | None:
        """The warning for a signing key that signed nothing (None when there is none)."""
        if not self.key_given or self.signed:
            return None
        state = "signed earlier" if self.entry.signature else "unsigned"
        return Notice(
            codes.PUBLISH_KEY_UNUSED,
            f"--sign-key was not used: {self.name} {self.entry.version} was already published "
            f"with this archive ({state}), and a published entry never changes",
            hint="to publish a signed version, bump the version in pack.yaml and publish again",
        )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def publish(
    pack_dir: Path,
    repo_root: Path,
    *,
    sign_key: str | None = None,
    published: str | None = None,
    display: str | None = None,
) -> Published:
    """Validate, archive and index the pack in `pack_dir`; returns what it did (`Published`).

    `display` names the pack folder in diagnostics (default: `pack_dir`).
    """
    from converge_dsl.packs._lint import template_diagnostics

    pack = load_pack(pack_dir, display=display)
    problems = [d for d in template_diagnostics(pack) if d.is_error]
    if problems:
        raise PipelineInvalid(best_first(problems))
    archive = build_archive(pack_dir)
    digest = sha256_hex(archive)
    version = str(pack.version)
    # Signed before the lock: a bad key left an empty repository folder behind.
    signature = sign(sign_key, pack.name, version, digest) if sign_key else None
    repository = FolderRepository(repo_root, must_exist=False)
    with _writing(repo_root):
        index = repository.fetch_index(pack.name) or PackIndex(pack.name, ())
        existing = index.entry(pack.version)
        if existing is not None:
            if existing.sha256 == digest:
                return Published(pack.name, existing, False, False, sign_key is not None)
            raise PackRefused(
                codes.PUBLISH_VERSION_EXISTS,
                f"{pack.name} {pack.version} is already published with a different digest",
                hint="published versions are immutable: bump the version in pack.yaml",
            )
        entry = IndexEntry(
            version=pack.version,
            sha256=digest,
            published=published or _now(),
            requires_converge=pack.requires_converge,
            requires_packs=pack.requires_packs,
            signature=signature,
        )
        write_atomic(repo_root / archive_path(pack.name, version), archive)
        write_atomic(repo_root / index_path(pack.name), index.with_entry(entry).to_bytes())
        names = set(repository.names()) | {pack.name}
        write_atomic(repo_root / NAMES_FILE, (json.dumps(sorted(names)) + "\n").encode())
        return Published(pack.name, entry, True, entry.signature is not None, sign_key is not None)


@contextlib.contextmanager
def _writing(repo_root: Path) -> Iterator[None]:
    """One writer of a folder repository at a time (`_lockfile.exclusive` on its folder):
    `publish` and `yank` read an index and the names file and write them whole, so two at
    once kept only the last one's (a version another had published was gone from the
    index)."""
    _not_a_file(repo_root)
    with exclusive(
        repo_root / NAMES_FILE,
        subject=f"repository {repo_root.as_posix()}",
        writer="another pack publish or yank",
        hint="wait for it to finish, then retry",
    ):
        yield


def _not_a_file(repo_root: Path) -> None:
    if repo_root.exists() and not repo_root.is_dir():
        raise PackRefused(
            codes.REPOSITORY_NOT_FOUND,
            f"repository {repo_root.as_posix()} is a file, not a folder",
            hint="give --repo a folder (pack publish makes it when it is not there)",
        )


def yank(repo_root: Path, name: str, version: str, *, yanked: bool = True) -> None:
    """Mark a version yanked (or not): resolution skips it unless a lock pins it."""
    parsed: Version | None = parse_version(version)
    repository = FolderRepository(repo_root)
    _not_a_file(repo_root)
    if not repo_root.is_dir():
        repository.fetch_index(name)  # raises: the repository does not exist (not made here)
    with _writing(repo_root):
        index = repository.fetch_index(name)
        if index is None or parsed is None:
            raise PackRefused(
                codes.PACK_VERSION_UNKNOWN,
                f"{name} {version} is not published in {repo_root.name}",
            )
        write_atomic(repo_root / index_path(name), index.with_yanked(parsed, yanked).to_bytes())
