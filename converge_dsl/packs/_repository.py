"""Pack repositories: a folder, an HTTP(S) base URL, or the built-in packs.

Every repository answers three questions through the `Repository` protocol:
the index of one pack (None when it has no such pack), the archive bytes of
one version, and the names it holds (for `pack list` only). Each counts the
index bytes it fetched, which is what `bench/packs.py` reports.

`open_repositories(specs, base)` turns the pipeline's `repositories:` list
(`builtin`, `{path}`, `{url, trusted_keys}`) into adapters; paths are relative
to the pipeline's folder. Resolution asks them in the order written and takes
a pack from the first repository that has it (no merging across repositories,
so a later repository can never shadow an earlier one's pack).

Every read is bounded (docs/architecture.md §10). A folder repository reads
regular files only (`read_regular`: no link, FIFO or device), within the
size caps and `FOLDER_DEADLINE_S`. An HTTP request (`_http.http_get`) has
one total deadline (`DEADLINE_S`) covering redirects and every header and
body byte, the same size caps (`MAX_INDEX_BYTES` for index and name files,
`MAX_DOWNLOAD_BYTES` for archives), and refuses redirects to another host
unless the repository lists it in `redirect_hosts`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from converge_dsl import codes
from converge_dsl._resources import builtin_packs_folder
from converge_dsl.packs._files import PackRefused, parse_json, read_regular
from converge_dsl.packs._http import (
    DEADLINE_S,
    MAX_DOWNLOAD_BYTES,
    MAX_INDEX_BYTES,
    READ_TIMEOUT_S,
    http_get,
    new_client,
)
from converge_dsl.packs._index import (
    NAMES_FILE,
    IndexEntry,
    PackIndex,
    archive_path,
    check_name,
    index_path,
    parse_index,
)
from converge_dsl.packs._manifest import load_pack

if TYPE_CHECKING:
    import httpx

FOLDER_DEADLINE_S = 30.0  # reading one file of a folder repository
BUILTIN = "builtin"
BUILTIN_PUBLISHED = "1970-01-01T00:00:00Z"


class Repository(Protocol):
    """Where packs come from. `id` is how the lock file names it."""

    @property
    def id(self) -> str: ...

    @property
    def trusted_keys(self) -> tuple[str, ...]: ...

    @property
    def index_bytes_fetched(self) -> int: ...

    def fetch_index(self, name: str) -> PackIndex | None: ...

    def fetch_archive(self, name: str, version: str) -> bytes: ...

    def names(self) -> list[str]: ...


class _FileRepository:
    """Shared logic of repositories addressed by relative file paths."""

    id: str
    trusted_keys: tuple[str, ...]

    def __init__(self) -> None:
        self.index_bytes_fetched = 0

    def _read(self, relative: str, *, archive: bool = False) -> bytes | None:
        """The file at `relative` (None when absent); `archive` selects the larger size cap."""
        raise NotImplementedError

    def fetch_index(self, name: str) -> PackIndex | None:
        data = self._read(index_path(name))
        if data is None:
            return None
        self.index_bytes_fetched += len(data)
        return parse_index(data, name, f"{self.id} {index_path(name)}")

    def fetch_archive(self, name: str, version: str) -> bytes:
        data = self._read(archive_path(name, version), archive=True)
        if data is None:
            raise PackRefused(
                codes.PACK_VERSION_UNKNOWN, f"{self.id} has no archive for {name} {version}"
            )
        return data

    def names(self) -> list[str]:
        data = self._read(NAMES_FILE)
        if data is None:
            return []
        names = parse_json(data, f"{self.id} {NAMES_FILE}")
        if not isinstance(names, list):
            raise PackRefused(
                codes.REPOSITORY_UNREADABLE, f"{self.id} {NAMES_FILE}: not a list of pack names"
            )
        return sorted(check_name(n, f"{self.id} {NAMES_FILE}") for n in names)


class FolderRepository(_FileRepository):
    """A repository in a local folder (also what `pack publish` writes).

    Reads go through `read_regular`: regular files only (a link, FIFO or
    device is refused before it is read), at most `max_index_bytes` /
    `max_archive_bytes` bytes and `deadline_s` seconds per file.
    """

    def __init__(
        self,
        root: Path,
        *,
        label: str | None = None,
        trusted_keys: Sequence[str] = (),
        must_exist: bool = True,
        deadline_s: float = FOLDER_DEADLINE_S,
        max_index_bytes: int | None = None,
        max_archive_bytes: int | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.root = root
        self.label = label if label is not None else root.as_posix()
        self.id = f"path:{self.label}"
        self.trusted_keys = tuple(trusted_keys)
        self.must_exist = must_exist  # False only for `pack publish`, which creates it
        self.deadline_s = deadline_s
        self.max_index_bytes = max_index_bytes
        self.max_archive_bytes = max_archive_bytes
        self._monotonic = monotonic

    def _read(self, relative: str, *, archive: bool = False) -> bytes | None:
        if archive:
            cap = self.max_archive_bytes or MAX_DOWNLOAD_BYTES
        else:
            cap = self.max_index_bytes or MAX_INDEX_BYTES
        data = read_regular(
            self.root / relative,
            cap=cap,
            deadline_s=self.deadline_s,
            where=f"{relative} in repository {self.id}",
            monotonic=self._monotonic,
        )
        if data is None and self.must_exist and not self.root.is_dir():
            raise PackRefused(
                codes.REPOSITORY_NOT_FOUND,
                f"repository {self.label} does not exist",
                hint="a folder repository is made by: converge-dsl pack publish PACK_DIR "
                "--repo DIR; in a pipeline, paths are relative to the pipeline file",
            )
        return data


class HttpRepository(_FileRepository):
    """A repository served over HTTP(S) at `base_url` (the same layout as a folder).

    Every read is one `http_get`: a total deadline of `deadline_s` (redirects
    and header bytes included, measured with `monotonic`), the size caps
    `max_index_bytes` / `max_archive_bytes`, and redirects to another host
    refused unless the host is in `redirect_hosts`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        trusted_keys: Sequence[str] = (),
        redirect_hosts: Sequence[str] = (),
        client: httpx.Client | None = None,
        timeout_s: float = READ_TIMEOUT_S,
        deadline_s: float = DEADLINE_S,
        max_index_bytes: int = MAX_INDEX_BYTES,
        max_archive_bytes: int = MAX_DOWNLOAD_BYTES,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        _check_base_url(base_url)
        self.base_url = base_url.rstrip("/") + "/"
        self.id = f"url:{base_url.rstrip('/')}"
        self.trusted_keys = tuple(trusted_keys)
        self.redirect_hosts = frozenset(redirect_hosts)
        self.deadline_s = deadline_s
        self.timeout_s = min(timeout_s, deadline_s)  # no single read waits past the deadline
        self.max_index_bytes = max_index_bytes
        self.max_archive_bytes = max_archive_bytes
        self._monotonic = monotonic
        self._client = client or new_client(self.timeout_s)

    def _read(self, relative: str, *, archive: bool = False) -> bytes | None:
        return http_get(
            self._client,
            self.base_url + relative,
            cap=self.max_archive_bytes if archive else self.max_index_bytes,
            repository=self.base_url,
            deadline_s=self.deadline_s,
            read_timeout_s=self.timeout_s,
            redirect_hosts=self.redirect_hosts,
            monotonic=self._monotonic,
        )


def _check_base_url(base_url: str) -> None:
    """Refuse a base url with a query or a fragment: each file is asked at the base url
    with its path appended, so such a url asked for other files (a repository that
    listed no pack, or any answer the server gave)."""
    # The characters, not urlsplit's parts: an empty query or fragment ('repo?') is
    # no part, and still cuts the paths appended to it.
    at = min((i for i in (base_url.find("?"), base_url.find("#")) if i >= 0), default=-1)
    if at >= 0:
        cut = base_url[at:]
        raise PackRefused(
            codes.REPOSITORY_UNREACHABLE,
            f"repository url {base_url!r} has a query or fragment ({cut!r}): pack files are "
            "asked for under its path, which it would cut",
            hint="a repository url is http(s)://HOST[:PORT]/PATH, without '?' or '#'",
        )


@dataclass
class BuiltinRepository:
    """The packs shipped in `builtin_packs/`, indexed and archived on the fly.

    Archives are normalised, so their digests are stable across machines.
    """

    root: Path = field(default_factory=lambda: Path(str(builtin_packs_folder())))
    id: str = BUILTIN
    trusted_keys: tuple[str, ...] = ()
    index_bytes_fetched: int = 0
    _archives: dict[str, bytes] = field(default_factory=dict, repr=False)

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "pack.yaml").is_file())

    def fetch_index(self, name: str) -> PackIndex | None:
        folder = self.root / check_name(name)
        if not (folder / "pack.yaml").is_file():
            return None
        from converge_dsl.packs._archive import build_archive, sha256_hex

        pack = load_pack(folder)
        archive = build_archive(folder)
        self._archives[f"{name}-{pack.version}"] = archive
        entry = IndexEntry(
            version=pack.version,
            sha256=sha256_hex(archive),
            published=BUILTIN_PUBLISHED,
            requires_converge=pack.requires_converge,
            requires_packs=pack.requires_packs,
        )
        index = PackIndex(name, (entry,))
        self.index_bytes_fetched += len(index.to_bytes())
        return index

    def fetch_archive(self, name: str, version: str) -> bytes:
        key = f"{name}-{version}"
        if key not in self._archives:
            self.fetch_index(name)
        if key not in self._archives:
            raise PackRefused(codes.PACK_VERSION_UNKNOWN, f"builtin has no {name} {version}")
        return self._archives[key]


def open_repository(spec: object, base: Path, client: httpx.Client | None = None) -> Repository:
    """One adapter from one `repositories:` entry of a pipeline."""
    if spec == BUILTIN:
        return BuiltinRepository()
    if isinstance(spec, Mapping) and "path" in spec:
        keys = tuple(spec.get("trusted_keys") or ())
        return FolderRepository(
            base / str(spec["path"]), label=str(spec["path"]), trusted_keys=keys
        )
    if isinstance(spec, Mapping) and "url" in spec:
        keys = tuple(spec.get("trusted_keys") or ())
        hosts = tuple(str(h) for h in spec.get("redirect_hosts") or ())
        return HttpRepository(
            str(spec["url"]), trusted_keys=keys, redirect_hosts=hosts, client=client
        )
    raise PackRefused(
        codes.PIPELINE_PACKS_MALFORMED,
        f"unknown repository {spec!r}",
        hint="use builtin, {path: ...} or {url: ...}",
    )


def open_repositories(
    specs: Sequence[object] | None, base: Path, client: httpx.Client | None = None
) -> list[Repository]:
    """Adapters in the order written; no `repositories:` means `[builtin]`."""
    return [open_repository(s, base, client) for s in (specs if specs else [BUILTIN])]
