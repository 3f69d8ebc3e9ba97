"""Pin moves `lock` refuses unless told: a lower version, or another digest for a version.

`check_pin_moves(previous, lock, ...)` compares the pipeline's previous lock
section with the one `lock` is about to write (docs/architecture.md §10):

- a pack pinned at a *lower* version than before is refused (CD565) unless
  `allow_downgrade`, or unless the pipeline's own specifier no longer admits
  the old version (the user asked for the move by editing `packs:`). This
  catches a newest version that vanished from an index, signed or not;
- a pack pinned at the *same* version with a *different* sha256 is refused
  (CD566) unless `repin`: a version's archive never changes, so a new digest
  means it was re-published or tampered with (e.g. after a run refused the
  tampered archive, `lock` would otherwise silently trust the new one).

Each refusal names the pack, both pins, the repository, why it moved (as far
as the repository's index tells) and the flag that accepts the move.

A pin the lock keeps although its repository has since yanked it is not
refused (re-locking never moves a working pipeline by surprise) but warned
about: `yanked_pin_notice` (CD572) says how to move off it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from packaging.version import Version

from converge_dsl.codes import (
    LOCK_DOWNGRADE_REFUSED,
    LOCK_REPIN_REFUSED,
    LOCKED_PIN_YANKED,
    NEWER_VERSION_AVAILABLE,
)
from converge_dsl.packs._files import Notice, PackRefused
from converge_dsl.packs._index import PackIndex
from converge_dsl.packs._lockfile import LockedPack, LockFile
from converge_dsl.packs._manifest import parse_specifier


def _why_lower(old: LockedPack, new: LockedPack, index: PackIndex | None) -> str:
    """Why the resolution left `old`'s version, as far as `index` (old's repository) tells."""
    if new.repository != old.repository:
        return f"it now comes from {new.repository} instead of {old.repository}"
    if index is None:
        return f"{old.repository} no longer offers {old.name} at all"
    entry = next((e for e in index.entries if str(e.version) == old.version), None)
    if entry is None:
        return f"{old.version} is no longer in the index of {old.repository}"
    if entry.yanked:
        return f"{old.version} was yanked from {old.repository}"
    return f"the other requirements of the pipeline's packs exclude {old.version}"


def check_pin_moves(
    previous: LockFile,
    lock: LockFile,
    *,
    allow_downgrade: bool,
    repin: bool,
    index_of: Callable[[str, str], PackIndex | None],
    command: str,
    moving: Collection[str] = (),
) -> None:
    """Raise `PackRefused` for the first pin move not allowed (see the module docstring).

    `index_of(repository id, name)` reads an index again to explain a
    downgrade; `command` is the lock command as the user typed it (for hints);
    the packs in `moving` were named by `lock --upgrade`, so a move down is theirs
    to ask for (off a yanked pin).
    """
    for name, new in sorted(lock.packs.items()):
        old = previous.packs.get(name)
        if old is None:
            continue
        if Version(new.version) < Version(old.version) and not allow_downgrade:
            if name not in moving and _admitted(lock.packs_requested, name, old.version):
                why = _why_lower(old, new, index_of(old.repository, name))
                raise PackRefused(
                    LOCK_DOWNGRADE_REFUSED,
                    f"lock would move {name} down from {old.version} to {new.version} "
                    f"({new.repository}): {why}; the lock was not changed",
                    hint=f"if the older version is expected, run: {command} --allow-downgrade",
                )
        elif new.version == old.version and new.sha256 != old.sha256 and not repin:
            raise PackRefused(
                LOCK_REPIN_REFUSED,
                f"lock would re-pin {name} {new.version} to another archive: {new.repository} "
                f"now serves sha256 {new.sha256[:16]}..., the lock has {old.sha256[:16]}...; "
                "a published version never changes, so it was re-published or tampered with; "
                "the lock was not changed",
                hint=f"ask the repository owner; if the new archive is expected, run: "
                f"{command} --repin",
            )


def _admitted(requested: Mapping[str, str], name: str, version: str) -> bool:
    """Whether the pipeline's own specifier for `name` still admits `version`.

    A pack the pipeline does not request directly counts as admitted: only an
    edit of `packs:` by the user makes a downgrade explicit.
    """
    text = requested.get(name)
    specifier = parse_specifier(text) if text is not None else None
    return specifier is None or specifier.contains(version, prereleases=True)


def yanked_pin_notice(
    name: str,
    version: str,
    *,
    repository: str,
    specifier: str | None,
    command: str,
    index: PackIndex | None = None,
) -> Notice:
    """The warning for a pin the lock keeps although `repository` has yanked it.

    `specifier` is the pipeline's own requirement on `name` (None for a pack
    only other packs require); `command` re-locks, as the user typed it
    (`converge-dsl lock PIPELINE`); `index` is the repository's index of `name`.
    The hint is a command that works: `lock --upgrade NAME` when a live version
    fits the specifier (with `--allow-downgrade` when that version is lower),
    else which specifier to widen.
    """
    target = newest_live(index, specifier) if index is not None else None
    upgrade = f"{command} --upgrade {name}"
    if target is not None:
        hint = f"to move to {name} {target}, run: {upgrade}"
    else:
        wanted = f"'{specifier}'" if specifier else "its requirements"
        hint = (
            f"no live version of {name} fits {wanted}: widen packs: {name} in the pipeline, "
            f"then run: {upgrade}"
        )
    return Notice(
        LOCKED_PIN_YANKED,
        f"{name} {version}, pinned by the lock, is yanked in {repository}; "
        "the lock keeps it until you move off it",
        hint=hint,
    )


def newest_live(index: PackIndex, specifier: str | None) -> Version | None:
    """The newest version of `index` that is not yanked and that `specifier` admits."""
    spec = parse_specifier(specifier) if specifier is not None else None
    live = [
        e.version
        for e in index.entries
        if not e.yanked and (spec is None or spec.contains(e.version, prereleases=False))
    ]
    return max(live, default=None)


def newer_version_notice(
    name: str, pinned: str, newer: Version, *, specifier: str, command: str
) -> Notice:
    """The note `lock` gives when the lock keeps `pinned` although `newer` fits too."""
    upgrade = f"{command} --upgrade {name}"
    return Notice(
        NEWER_VERSION_AVAILABLE,
        f"{name} {newer} is published and fits '{specifier}'; the lock keeps {pinned}",
        hint=f"to move to it, run: {upgrade}",
    )
