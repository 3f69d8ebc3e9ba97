"""The local pack cache: verified archives and their unpacked folders.

Layout under the cache root (default: the platform user cache folder,
`platformdirs.user_cache_path("converge-dsl") / "packs"`, overridable with the
variable `CONVERGE_DSL_CACHE` of the environment given (`environ`, default: the
process's) or the `root` argument):

    archives/<sha256>.tar.gz     exactly the bytes whose digest is the name
    unpacked/<sha256>/           the pack folder, written once, atomically

`install` verifies the signature (when the repository has trusted keys) and
the digest *before* anything is unpacked; a locked pipeline whose packs are
cached never touches the network. The unpacked folder is named by the digest
it was verified against, but the cache is a writable folder, so its content is
not trusted: the first time a process uses an unpacked pack, `install` proves
that the folder still holds exactly the files of the archive (compared with
the cached archive, itself re-hashed; without it, by rebuilding the normalised
archive from the folder and comparing digests). An altered folder is replaced
by a fresh unpack of the verified archive and recorded in `repaired` (which
`pack verify` reports); when no verified archive can be had, `PackError`
names the pack and the fix. Each (folder, digest) is proven once per process.
`fetched` lists the archives `install` had to download. A downloaded
archive enters the cache only after it unpacked: one refused while
unpacking (a cap of `converge_dsl.packs._archive`) leaves no archive, no
folder and no lock behind.

`find` is the read-only lookup `validate` uses: it never fetches, never
unpacks, never repairs and never deletes; a pack that is not unpacked in the
cache is None, an altered one a `PackError`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from converge_dsl import codes
from converge_dsl._reading import ReadRefused, read_bytes
from converge_dsl.errors import PackError
from converge_dsl.packs._files import PackRefused, write_atomic
from converge_dsl.packs._lockfile import LockedPack
from converge_dsl.packs._repository import Repository
from converge_dsl.packs._signing import verify

CACHE_ENV = "CONVERGE_DSL_CACHE"
# (unpacked folder, sha256) pairs proven intact by this process.
_PROVEN: set[tuple[str, str]] = set()


def default_cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """The cache root `CONVERGE_DSL_CACHE` of `environ` (default: the process's) names,
    else the user cache folder's."""
    override = (os.environ if environ is None else environ).get(CACHE_ENV)
    if override:
        return Path(override)
    import platformdirs

    return platformdirs.user_cache_path("converge-dsl") / "packs"


class PackCache:
    """Content-addressed archives and unpacked packs (see the module docstring)."""

    def __init__(
        self, root: Path | None = None, *, environ: Mapping[str, str] | None = None
    ) -> None:
        self.root = root if root is not None else default_cache_root(environ)
        self.repaired: list[str] = []  # "NAME VERSION" of packs whose folder did not match
        self.fetched: list[LockedPack] = []  # archives downloaded from their repository

    def _archive_file(self, sha256: str) -> Path:
        return self.root / "archives" / f"{sha256}.tar.gz"

    def folder(self, sha256: str) -> Path:
        return self.root / "unpacked" / sha256

    def cached_archive(self, sha256: str, *, drop_corrupt: bool = True) -> bytes | None:
        """The cached archive, if present and intact (a corrupt one is dropped, by default)."""
        from converge_dsl.packs._archive import sha256_hex

        path = self._archive_file(sha256)
        try:
            data = read_bytes(path, "cached pack archive")
        except (OSError, ReadRefused):  # absent, or not a readable file: fetched again
            return None
        if sha256_hex(data) != sha256:
            if drop_corrupt:
                path.unlink(missing_ok=True)
            return None
        return data

    def find(self, locked: LockedPack, trusted_keys: Sequence[str], *, fix: str) -> Path | None:
        """The unpacked folder of `locked` if the cache holds it intact; None if it does not.

        Read-only: nothing is fetched, written or removed. The signature is
        verified as `install` does (`PackError`); an altered folder is a
        `PackError` whose hint is `fix` (the command that re-installs it).
        """
        verify(
            dict(locked.signature) if locked.signature else None,
            trusted_keys,
            locked.name,
            locked.version,
            locked.sha256,
        )
        folder = self.folder(locked.sha256)
        proof = (str(folder), locked.sha256)
        if not folder.is_dir():
            return None
        if proof in _PROVEN or self._intact(folder, locked.sha256, drop_corrupt=False):
            _PROVEN.add(proof)
            return folder
        raise PackRefused(
            codes.PACK_NOT_INSTALLABLE,
            f"the unpacked copy of {locked.name} {locked.version} in the pack cache "
            "does not match its locked archive (altered)",
            hint=fix,
        )

    def install(self, locked: LockedPack, repositories: Mapping[str, Repository]) -> Path:
        """The unpacked folder of `locked`, fetching, verifying or repairing it if needed."""
        repository = repositories.get(locked.repository)
        if repository is None:
            raise PackRefused(
                codes.LOCK_STALE,
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
        proof = (str(folder), locked.sha256)
        if proof in _PROVEN and folder.is_dir():
            return folder
        altered = False
        if folder.is_dir():
            if self._intact(folder, locked.sha256):
                _PROVEN.add(proof)
                return folder
            altered = True
            self.repaired.append(f"{locked.name} {locked.version}")
            _discard(folder)
        from converge_dsl.packs._archive import unpack

        try:
            data, downloaded = self._verified_archive(locked, repository)
        except PackError as exc:
            if altered:
                raise PackRefused(
                    codes.PACK_NOT_INSTALLABLE,
                    f"the unpacked copy of {locked.name} {locked.version} in the pack cache "
                    "does not match its locked archive, and the archive cannot be fetched "
                    f"again to replace it: {exc.cited}",
                    hint="make the repository reachable and run the command again "
                    "(the unmatched copy was removed)",
                ) from None
            raise
        where = f"archive of {locked.name} {locked.version} from {locked.repository}"
        try:
            unpack(data, folder, where)  # checks every member from the stream first
        except PackError:
            self._archive_file(locked.sha256).unlink(missing_ok=True)  # cached by an older run
            raise
        if downloaded:
            # Cached only once it unpacked: a refused archive leaves nothing to pay for again.
            write_atomic(self._archive_file(locked.sha256), data)
            self.fetched.append(locked)
        _PROVEN.add(proof)
        return folder

    def _intact(self, folder: Path, sha256: str, *, drop_corrupt: bool = True) -> bool:
        """Whether `folder` holds exactly the archive whose digest is `sha256`."""
        from converge_dsl.packs._archive import build_archive, matches, sha256_hex

        try:
            archive = self.cached_archive(sha256, drop_corrupt=drop_corrupt)
            if archive is not None:
                return matches(archive, folder)
            return sha256_hex(build_archive(folder)) == sha256
        except (PackError, OSError):
            return False

    def _verified_archive(self, locked: LockedPack, repository: Repository) -> tuple[bytes, bool]:
        """The archive of `locked` and whether it was downloaded; digest-checked.

        A fetched archive is not written to the cache here: `install` caches it
        once it has unpacked, so an archive refused while unpacking is never kept.
        """
        from converge_dsl.packs._archive import sha256_hex

        data = self.cached_archive(locked.sha256)
        if data is not None:
            return data, False
        data = repository.fetch_archive(locked.name, locked.version)
        actual = sha256_hex(data)
        if actual != locked.sha256:
            raise PackRefused(
                codes.PACK_NOT_INSTALLABLE,
                f"digest mismatch for {locked.name} {locked.version} from {repository.id}: "
                f"expected sha256 {locked.sha256}, got {actual}; nothing was unpacked",
                hint="the archive was altered after locking; ask the repository owner, "
                "or re-lock if the change is expected",
            )
        return data, True


def _discard(folder: Path) -> None:
    """Remove an altered unpacked folder (renamed aside first, so it vanishes at once)."""
    import shutil
    import tempfile

    aside = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.altered."))
    try:
        folder.rename(aside / folder.name)
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(aside, ignore_errors=True)
    if folder.exists():
        raise PackRefused(
            codes.PACK_FILE_NOT_WRITTEN,
            f"cannot remove the altered cache folder {folder.name}",
            hint=f"delete the pack cache folder ({CACHE_ENV} or the user cache) and retry",
        )
