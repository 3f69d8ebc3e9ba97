"""What the language server knows of packs: names and versions to offer, a pack suggestor's source.

Offline and read-only, as an editor must be while typing: only the `builtin`
and folder repositories the pipeline lists are asked (a URL repository is not
fetched), and a pack's own files are read from the pack cache as `validate`
reads them (`packs.read_locked_packs`, which never fetches). Whatever cannot be
read (a broken index, a missing or stale lock, an empty cache) offers nothing:
`validate`'s diagnostics already say why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl.diagnostics import SourceSpan
from converge_dsl.errors import ConvergeError
from converge_dsl.frontend import PipelineFacts

if TYPE_CHECKING:
    from packaging.version import Version

    from converge_dsl.packs import Pack

Offer = tuple[str, str]  # (the text to complete, what it is)
Environ = Mapping[str, str] | None  # the server's environment (None: the process's)
_SPECIFIERS_PER_PACK = 3  # the newest versions offered as an exact pin


def pack_names(facts: PipelineFacts, pipeline: Path) -> list[Offer]:
    """The packs the pipeline's offline repositories publish, each with its newest version."""
    newest: dict[str, str] = {}
    for repository, name, versions in _published(facts, pipeline):
        if name not in newest and versions:
            newest[name] = f"pack {name}, newest {versions[-1]} ({repository})"
    return sorted(newest.items())


def specifiers(facts: PipelineFacts, pipeline: Path, name: str) -> list[Offer]:
    """Specifiers for pack `name`: a compatible range of its newest version, then exact pins
    of its newest versions (yanked ones left out); the locked version says so."""
    from converge_dsl.packs import default_specifier

    locked = _locked_version(pipeline, name)
    for repository, _, versions in _published(facts, pipeline, only=name):
        if not versions:
            continue
        offers = [(default_specifier(versions[-1]), f"compatible with {versions[-1]}")]
        for version in reversed(versions[-_SPECIFIERS_PER_PACK:]):
            note = " (locked)" if str(version) == locked else ""
            offers.append((f"=={version}", f"exactly {version} from {repository}{note}"))
        return offers
    return []


def uses(facts: PipelineFacts, pipeline: Path, environ: Environ) -> list[Offer]:
    """`PACK/SUGGESTOR` for every suggestor of the locked packs the cache of `environ`
    holds."""
    offers = []
    for pack in _cached_packs(facts, pipeline, environ):
        for name, definition in sorted(pack.suggestors.items()):
            about = definition.description or definition.kind
            offers.append((f"{pack.name}/{name}", f"{pack.name} {pack.version}: {about}"))
    return offers


def suggestor_source(
    facts: PipelineFacts, pipeline: Path, use: str, environ: Environ
) -> SourceSpan | None:
    """Where `use` (`PACK/SUGGESTOR`) is defined in the cached `pack.yaml` of its locked
    version (in the cache of `environ`): the span of its name, in a file the editor can
    open."""
    pack_name, _, suggestor = use.partition("/")
    for pack in _cached_packs(facts, pipeline, environ):
        if pack.name != pack_name or suggestor not in pack.suggestors or pack.document is None:
            continue
        span = pack.document.source_map.key_span(("suggestors", suggestor))
        file = str(pack.folder / "pack.yaml")
        return SourceSpan(file, span.line, span.column, span.end_line, span.end_column)
    return None


def _published(
    facts: PipelineFacts, pipeline: Path, only: str | None = None
) -> list[tuple[str, str, list[Version]]]:
    """(repository id, pack name, its unyanked versions oldest first), in the order the
    pipeline lists its offline repositories; with `only`, that pack's alone."""
    from converge_dsl.packs import open_repositories

    written = [r.written for r in facts.manifest.repositories if r.url is None]
    if facts.manifest.repositories and not written:
        return []
    found: list[tuple[str, str, list[Version]]] = []
    try:
        repositories = open_repositories(written or None, pipeline.parent)
    except ConvergeError:
        return []
    for repository in repositories:
        try:
            for name in [only] if only is not None else repository.names():
                index = repository.fetch_index(name)
                if index is not None:
                    versions = [e.version for e in index.entries if not e.yanked]
                    found.append((repository.id, name, versions))
        except (ConvergeError, OSError):
            continue
    return found


def _locked_version(pipeline: Path, name: str) -> str | None:
    from converge_dsl.packs import read_lock

    try:
        lock = read_lock(pipeline)
    except (ConvergeError, OSError):
        return None
    locked = lock.packs.get(name) if lock is not None else None
    return None if locked is None else locked.version


def _cached_packs(facts: PipelineFacts, pipeline: Path, environ: Environ) -> list[Pack]:
    from converge_dsl.packs import PackCache, read_locked_packs

    try:
        cache = PackCache(environ=environ)
        packs, _ = read_locked_packs(pipeline, facts.manifest, cache=cache)
    except (ConvergeError, OSError):
        return []
    return list(packs.values())
