"""Resolve pack specifiers, transitively, to exact versions.

A backtracking search over the sparse indexes: packs are taken in the order
they are first required; candidates are tried newest first (a version pinned
by the existing lock first, so re-locking changes as little as possible).
A candidate is skipped when it is yanked (unless the lock pins it), when it
needs another converge-dsl, or when it violates any requirement collected so
far. Only the indexes of packs actually reached are fetched.

When nothing fits, the error explains every distinct conflict the search
met (the first `MAX_CONFLICTS` of them), each with every requirement on the
pack, who asked for it and which versions it would accept, and every version
that exists, marking the yanked ones and those needing another converge-dsl.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from converge_dsl._version import __version__
from converge_dsl.codes import PACK_RESOLUTION_GAVE_UP, PACK_UNSATISFIABLE
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.packs._files import PackRefused
from converge_dsl.packs._index import IndexEntry, PackIndex
from converge_dsl.packs._repository import Repository

MAX_STEPS = 20_000
MAX_CONFLICTS = 5


@dataclass(frozen=True, slots=True)
class Requirement:
    """`requester` (e.g. `pipeline 'demo'` or `pack a 1.0.0`) asks for `name` `specifier`."""

    requester: str
    name: str
    specifier: SpecifierSet

    def __str__(self) -> str:
        wanted = str(self.specifier) or "any version"
        return f"{self.requester} asks for {self.name} {wanted}"


@dataclass(frozen=True, slots=True)
class Resolved:
    """One pack pinned by a resolution."""

    name: str
    entry: IndexEntry
    repository: str
    requested_by: tuple[str, ...]


class _Search:
    def __init__(
        self,
        repositories: Sequence[Repository],
        locked: Mapping[str, Version],
        converge_version: Version,
    ) -> None:
        self.repositories = repositories
        self.locked = locked
        self.converge_version = converge_version
        self.indexes: dict[str, tuple[PackIndex, str] | None] = {}
        self.conflicts: list[str] = []
        self.culprits: list[str] = []  # the pack each conflict is about, in the order met
        self.steps = 0

    def index(self, name: str) -> tuple[PackIndex, str] | None:
        if name not in self.indexes:
            self.indexes[name] = None
            for repository in self.repositories:
                found = repository.fetch_index(name)
                if found is not None:
                    self.indexes[name] = (found, repository.id)
                    break
        return self.indexes[name]

    def note(self, message: str, name: str) -> None:
        if message not in self.conflicts:
            self.conflicts.append(message)
            self.culprits.append(name)

    def failure(self) -> str:
        """Every distinct conflict met, in the order met (at most `MAX_CONFLICTS`)."""
        shown = self.conflicts[:MAX_CONFLICTS]
        more = len(self.conflicts) - len(shown)
        tail = [f"... and {more} more conflict(s)"] if more > 0 else []
        return "\n".join(shown + tail) or "pack resolution failed"

    def unknown(self, name: str, requirements: Sequence[Requirement]) -> str:
        searched = ", ".join(r.id for r in self.repositories)
        known = {n for r in self.repositories for n in r.names()}
        guess = did_you_mean(name, known)
        lines = [f"no repository has pack {name!r} (searched: {searched})"]
        lines += [f"  {r}" for r in requirements]
        if guess:
            lines.append("  " + suggestion(guess))
        return "\n".join(lines)

    def usable(self, name: str, entry: IndexEntry) -> bool:
        """Not yanked (or pinned by the lock) and made for this converge-dsl."""
        pinned = self.locked.get(name) == entry.version
        return (not entry.yanked or pinned) and self.compatible(entry)

    def explain(self, name: str, requirements: Sequence[Requirement], index: PackIndex) -> str:
        usable = [e for e in index.entries if self.usable(name, e)]
        lines = [f"no version of pack {name!r} satisfies every requirement:"]
        for requirement in requirements:
            fits = [
                str(e.version)
                for e in usable
                if requirement.specifier.contains(e.version, prereleases=True)
            ]
            lines.append(f"  {requirement} (fits: {', '.join(fits) or 'none'})")
        described = []
        for entry in index.entries:
            notes = []
            if entry.yanked and entry not in usable:
                notes.append("yanked")
            if not self.compatible(entry):
                notes.append(f"needs converge-dsl {entry.requires_converge}")
            described.append(f"{entry.version}" + (f" ({'; '.join(notes)})" if notes else ""))
        lines.append(f"  versions that exist: {', '.join(described) or 'none'}")
        if any(e.yanked and e not in usable for e in index.entries):
            lines.append("  yanked versions are skipped unless the lock pins them")
        if any(not self.compatible(e) for e in index.entries):
            lines.append(f"  this is converge-dsl {self.converge_version}")
        return "\n".join(lines)

    def compatible(self, entry: IndexEntry) -> bool:
        spec = entry.requires_converge
        return spec is None or spec.contains(self.converge_version, prereleases=True)

    def candidates(
        self, name: str, index: PackIndex, reqs: Sequence[Requirement]
    ) -> list[IndexEntry]:
        pinned = self.locked.get(name)
        fitting = [
            e
            for e in reversed(index.entries)
            if self.usable(name, e)
            and all(r.specifier.contains(e.version, prereleases=e.version == pinned) for r in reqs)
        ]
        return sorted(fitting, key=lambda e: e.version != pinned)  # stable: pinned first

    def search(
        self,
        chosen: dict[str, tuple[IndexEntry, str]],
        reqs: dict[str, tuple[Requirement, ...]],
        todo: tuple[str, ...],
    ) -> tuple[dict[str, tuple[IndexEntry, str]], dict[str, tuple[Requirement, ...]]] | None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise PackRefused(
                PACK_RESOLUTION_GAVE_UP, f"pack resolution gave up after {MAX_STEPS} steps"
            )
        if not todo:
            return chosen, reqs
        name, rest = todo[0], todo[1:]
        if name in chosen:
            return self.search(chosen, reqs, rest)
        located = self.index(name)
        if located is None:
            self.note(self.unknown(name, reqs[name]), name)
            return None
        index, repository = located
        options = self.candidates(name, index, reqs[name])
        if not options:
            self.note(self.explain(name, reqs[name], index), name)
        for entry in options:
            now = {**chosen, name: (entry, repository)}
            grown = dict(reqs)
            queue = list(rest)
            fits = True
            for dep, spec in sorted(entry.requires_packs.items()):
                requirement = Requirement(f"pack {name} {entry.version}", dep, spec)
                grown[dep] = (*grown.get(dep, ()), requirement)
                if dep in now:
                    if not spec.contains(now[dep][0].version, prereleases=True):
                        located_dep = self.index(dep)
                        assert located_dep is not None
                        self.note(self.explain(dep, grown[dep], located_dep[0]), dep)
                        fits = False
                        break
                elif dep not in queue:
                    queue.append(dep)
            if fits:
                found = self.search(now, grown, tuple(queue))
                if found is not None:
                    return found
        return None


def resolve(
    roots: Mapping[str, SpecifierSet],
    repositories: Sequence[Repository],
    *,
    requester: str,
    locked: Mapping[str, Version] | None = None,
    converge_version: Version | None = None,
) -> dict[str, Resolved]:
    """Pin every pack reachable from `roots`; raises `PackError` explaining a conflict.

    `locked` lists versions from an existing lock: tried first, and allowed
    even when yanked.
    """
    search = _Search(repositories, locked or {}, converge_version or Version(__version__))
    reqs: dict[str, tuple[Requirement, ...]] = {
        name: (Requirement(requester, name, spec),) for name, spec in roots.items()
    }
    found = search.search({}, reqs, tuple(sorted(roots)))
    if found is None:
        raise PackRefused(
            PACK_UNSATISFIABLE,
            search.failure(),
            hint="relax a specifier, or publish a version that fits every requirement",
            packs=tuple(dict.fromkeys(search.culprits)),
        )
    chosen, requirements = found
    return {
        name: Resolved(
            name=name,
            entry=entry,
            repository=repository,
            requested_by=tuple(sorted({r.requester for r in requirements[name]})),
        )
        for name, (entry, repository) in sorted(chosen.items())
    }
