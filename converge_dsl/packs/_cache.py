"""The local pack cache: verified archives and their unpacked folders.

Layout under the cache root (default: the platform user cache folder,
`platformdirs.user_cache_path("converge-dsl") / "packs"`, overridable with the
environment variable `CONVERGE_DSL_CACHE` or the `root` argument):

    archives/<sha256>.tar.gz     exactly the bytes whose digest is the name
    unpacked/<sha256>/           the pack folder, written once, atomically

`install` verifies the signature (when the repository has trusted keys) and
the digest *before* anything is unpacked; a locked pipeline whose packs are
cached never touches the network. The unpacked folder is named by the digest
it was verified against and appears only after that check (atomically), so
its presence is the record that the digest was verified: a cached pack is
neither re-read nor re-hashed (the signature, when the repository has
trusted keys, is checked every time against the lock's record).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from converge_dsl.errors import PackError
from converge_dsl.packs._lockfile import LockedPack
from converge_dsl.packs._repository import Repository
from converge_dsl.packs._signing import verify

CACHE_ENV = "CONVERGE_DSL_CACHE"


def default_cache_root() -> Path:
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    import platformdirs

    return platformdirs.user_cache_path("converge-dsl") / "packs"


class PackCache:
    """Content-addressed archives and unpacked packs (see the module docstring)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_cache_root()

    def _archive_file(self, sha256: str) -> Path:
        return self.root / "archives" / f"{sha256}.tar.gz"

    def folder(self, sha256: str) -> Path:
        return self.root / "unpacked" / sha256

    def cached_archive(self, sha256: str) -> bytes | None:
        """The cached archive, if present and intact (a corrupt one is dropped)."""
        from converge_dsl.packs._archive import sha256_hex

        path = self._archive_file(sha256)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if sha256_hex(data) != sha256:
            path.unlink(missing_ok=True)
            return None
        return data

    def install(self, locked: LockedPack, repositories: Mapping[str, Repository]) -> Path:
        """The unpacked folder of `locked`, fetching and verifying it if needed."""
        repository = repositories.get(locked.repository)
        if repository is None:
            raise PackError(
                f"{locked.name} {locked.version} comes from {locked.repository}, "
                "which the pipeline no longer lists",
                hint="re-run converge-dsl lock",
            )
        verify(
            dict(locked.signature) if locked.signature else None,
            repository.trusted_keys,
            locked.name,
            locked.version,
            locked.sha256,
        )
        folder = self.folder(locked.sha256)
        if folder.is_dir():
            return folder
        from converge_dsl.packs._archive import sha256_hex, unpack

        data = self.cached_archive(locked.sha256)
        if data is None:
            data = repository.fetch_archive(locked.name, locked.version)
            actual = sha256_hex(data)
            if actual != locked.sha256:
                raise PackError(
                    f"digest mismatch for {locked.name} {locked.version} from {repository.id}: "
                    f"expected sha256 {locked.sha256}, got {actual}; nothing was unpacked",
                    hint="the archive was altered after locking; ask the repository owner, "
                    "or re-lock if the change is expected",
                )
            path = self._archive_file(locked.sha256)
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_bytes(data)
            os.replace(temporary, path)
        folder.parent.mkdir(parents=True, exist_ok=True)
        unpack(data, folder)
        return folder
