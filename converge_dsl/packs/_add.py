"""`pack add NAME [SPECIFIER] PIPELINE [--repo REPO]`: require a pack, list its repository, re-lock.

`add_pack(pipeline, name, specifier, repo=...)`:

- with `repo` (`builtin`, a folder, or an http(s) URL), the repository is
  added to the pipeline's `repositories:` unless it is already listed (a
  folder is compared by where it is, written relative to the pipeline's
  folder as the language reads it; a URL without its trailing `/`). A
  pipeline without `repositories:` reads `builtin` alone, so the new list
  keeps `builtin` first. A folder that does not exist is refused before
  anything is written;
- without a specifier, the newest version is resolved (against the
  repositories including the new one) and a compatible range written
  (`default_specifier`);
- the requirement is added (`add_pack_requirement`: comments, layout, CRLF
  line ends and a BOM kept), the file replaced atomically (through a link, mode
  kept), the pipeline re-locked, and the file restored byte for byte when
  anything fails (an unknown pack, an unreachable repository, a refusal);
- the first repository that has a pack provides it, so when an earlier one
  has it, `warn` hears which one (CD576) and how to change the order.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl._reading import read_bytes, read_failure
from converge_dsl.errors import UsageError
from converge_dsl.packs._cache import PackCache
from converge_dsl.packs._edit import add_pack_requirement, add_repository, default_specifier
from converge_dsl.packs._files import Notice, PackRefused, write_atomic
from converge_dsl.packs._index import check_name
from converge_dsl.packs._lockfile import lock_hint
from converge_dsl.packs._workspace import PipelinePacks, lock_pipeline

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True, slots=True)
class Added:
    """What `pack add` did: the requirement written, the version locked and where it came from.

    `repository_added` is the entry written into `repositories:` (None when the
    repository was already listed or none was asked for).
    """

    name: str
    specifier: str
    version: str
    repository: str
    repository_added: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "specifier": self.specifier,
            "locked": self.version,
            "repository": self.repository,
            "repository_added": self.repository_added,
        }


def repository_entry(repo: str, pipeline: Path) -> str | dict[str, str]:
    """The `repositories:` entry of `repo` as given on the command line (paths from the cwd)."""
    if repo == "builtin":
        return "builtin"
    if repo.startswith(("http://", "https://")):
        return {"url": repo.rstrip("/")}
    folder = Path(repo)
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise PackRefused(
            codes.REPOSITORY_NOT_FOUND,
            f"repository {repo} {state}",
            hint="give a folder made by converge-dsl pack publish PACK_DIR --repo DIR, "
            "an http(s) URL, or builtin",
        )
    relative = os.path.relpath(folder.resolve(), pipeline.parent.resolve())
    return {"path": PurePath(relative).as_posix()}


def entry_id(entry: Any) -> str:
    """The repository id of a `repositories:` entry (as `open_repositories` names it)."""
    if isinstance(entry, Mapping) and "path" in entry:
        return f"path:{entry['path']}"
    if isinstance(entry, Mapping) and "url" in entry:
        return f"url:{str(entry['url']).rstrip('/')}"
    return str(entry)


def listed_as(entry: str | Mapping[str, str], specs: Sequence[Any], base: Path) -> str | None:
    """The id under which the pipeline already lists `entry` (None when it does not)."""
    for spec in specs or ["builtin"]:
        if entry == "builtin" or spec == "builtin":
            if entry == spec:
                return "builtin"
            continue
        if not isinstance(spec, Mapping) or not isinstance(entry, Mapping):
            continue
        same_url = "url" in entry and "url" in spec and str(spec["url"]).rstrip("/") == entry["url"]
        same_folder = (
            "path" in entry
            and "path" in spec
            and (base / str(spec["path"])).resolve() == (base / entry["path"]).resolve()
        )
        if same_url or same_folder:
            return entry_id(spec)
    return None


def _entry_text(entry: str | Mapping[str, str]) -> str:
    if isinstance(entry, Mapping):
        return "{" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}"
    return entry


_BOM = b"\xef\xbb\xbf"


def _read(pipeline: Path) -> bytes:
    try:
        data = read_bytes(pipeline, "pipeline")
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{pipeline} is not UTF-8 text", code=codes.FILE_UNREADABLE) from None
    except OSError as exc:
        raise read_failure(exc, pipeline, "pipeline") from None
    return data


def _write(pipeline: Path, data: bytes) -> None:
    """Replace the pipeline file's content atomically: never half written, mode kept.

    The file a link points at is the one replaced, so the link stays a link.
    """
    target = Path(os.path.realpath(pipeline))
    write_atomic(target, data, mode=stat.S_IMODE(target.stat().st_mode))


def add_pack(
    pipeline: Path,
    name: str,
    specifier: str | None = None,
    *,
    repo: str | None = None,
    cache: PackCache | None = None,
    client: httpx.Client | None = None,
    warn: Callable[[str], object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Added:
    """Add the requirement (and the repository) to `pipeline` and re-lock it (module docstring).

    `environ` is the environment the re-lock starts tool servers in and reads the pack
    cache's folder from (default: the process's)."""
    from packaging.specifiers import SpecifierSet

    from converge_dsl.packs._resolve import resolve

    check_name(name)  # before the file is touched: a diagnostic would point at the edit
    original = _read(pipeline)
    bom = _BOM if original.startswith(_BOM) else b""
    # Decoded as it is (no newline translation): the edit keeps CRLF line ends.
    text = original[len(bom) :].decode("utf-8")
    info = PipelinePacks.read(pipeline)
    added, wanted = None, None
    if repo is not None:
        entry = repository_entry(repo, pipeline)
        wanted = listed_as(entry, info.repositories, pipeline.parent)
        if wanted is None:
            text = add_repository(text, entry)
            added, wanted = _entry_text(entry), entry_id(entry)
            before = list(info.repositories) if info.repositories else ["builtin"]
            info = replace(info, repositories=(*before, entry))
    if specifier is None:
        found = resolve(
            {name: SpecifierSet()}, list(info.open(client).values()), requester="pack add"
        )
        specifier = default_specifier(found[name].entry.version)
    _write(pipeline, bom + add_pack_requirement(text, name, specifier).encode("utf-8"))
    try:
        lock = lock_pipeline(
            pipeline,
            cache=cache or PackCache(environ=environ),
            client=client,
            warn=warn,
            environ=environ,
        )
    except BaseException:
        _write(pipeline, original)
        raise
    locked = lock.packs[name]
    if wanted is not None and locked.repository != wanted and warn is not None:
        warn(
            Notice(
                codes.PACK_FROM_EARLIER_REPOSITORY,
                f"{name} {locked.version} comes from {locked.repository}, which the pipeline "
                f"lists before {wanted} (the first repository that has a pack provides it)",
                hint=f"to take it from {wanted}, list that repository first in repositories:, "
                f"then {lock_hint(pipeline)}",
            )
        )
    return Added(name, specifier, locked.version, locked.repository, added)
