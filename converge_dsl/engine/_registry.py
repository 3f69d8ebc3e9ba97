"""The suggestor registry: registration order, unique names, and the key -> suggestors index.

Eligibility is found through the index (suggestors listed under a dirty key,
plus those with no dependencies, which are candidates every cycle), so the
cost of a cycle depends on how many suggestors read the dirty keys, never on
how many are registered.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from converge_dsl import codes
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.engine.types import Suggestor
from converge_dsl.errors import ConvergeError

_NONE: tuple[int, ...] = ()


def is_synchronous(suggestor: Suggestor) -> bool:
    """Whether `suggestor` is a `SyncSuggestor` the engine runs inline (`synchronous` is True)."""
    return getattr(suggestor, "synchronous", False) is True


class Registry:
    """The suggestors of one engine in registration order, indexed by the keys they read.

    The engine passes it to each run, which asks it for `candidates`;
    `synchronous[i]` says whether `suggestors[i]` runs inline (`is_synchronous`).
    """

    __slots__ = ("_always", "_by_key", "_known_keys", "_names", "suggestors", "synchronous")

    def __init__(self, known_keys: frozenset[str]) -> None:
        self.suggestors: list[Suggestor] = []
        self.synchronous: list[bool] = []
        self._names: set[str] = set()
        self._by_key: dict[str, list[int]] = {}
        self._always: list[int] = []
        self._known_keys = known_keys

    def register(self, suggestor: Suggestor) -> None:
        name = suggestor.name
        if not isinstance(name, str) or not name.strip():
            raise ConvergeError(
                f"a suggestor needs a non-blank name (got {name!r})", code=codes.API_MISUSE
            )
        if name in self._names:
            raise ConvergeError(
                f"suggestor {name!r} is registered twice",
                hint="suggestor names must be unique within a run",
                code=codes.API_MISUSE,
            )
        dependencies = tuple(suggestor.dependencies)
        for key in dependencies:
            if key not in self._known_keys:
                close = did_you_mean(key, self._known_keys)
                raise ConvergeError(
                    f"suggestor {name!r} depends on unknown key {key!r}",
                    hint=suggestion(close) if close else "declare the key in `keys:`",
                    code=codes.API_MISUSE,
                )
        if suggestor.provenance().is_empty:
            raise ConvergeError(
                f"suggestor {name!r} has an empty provenance", code=codes.API_MISUSE
            )
        index = len(self.suggestors)
        self.suggestors.append(suggestor)
        self.synchronous.append(is_synchronous(suggestor))
        self._names.add(name)
        if dependencies:
            for key in dict.fromkeys(dependencies):
                self._by_key.setdefault(key, []).append(index)
        else:
            self._always.append(index)

    def register_many(self, suggestors: tuple[Suggestor, ...]) -> None:
        """`register` each of `suggestors`, in order; into an empty registry, a tuple
        registered before (the compiled suggestors of a pipeline run many times) is
        copied from the registry it made then, with no check repeated."""
        if self.suggestors:
            for suggestor in suggestors:
                self.register(suggestor)
            return
        kept = _MADE.get(id(suggestors))
        if kept is None or kept[0] is not suggestors or kept[1] != self._known_keys:
            for suggestor in suggestors:
                self.register(suggestor)
            if len(_MADE) >= _KEEP:
                _MADE.clear()
            _MADE[id(suggestors)] = (suggestors, self._known_keys, self._copy())
            return
        self._take(kept[2])

    def _copy(self) -> Registry:
        copy = Registry(self._known_keys)
        copy._take(self)
        return copy

    def _take(self, other: Registry) -> None:
        """Hold what `other` holds (copies: either may register more afterwards)."""
        self.suggestors = list(other.suggestors)
        self.synchronous = list(other.synchronous)
        self._names = set(other._names)
        self._by_key = {key: list(indices) for key, indices in other._by_key.items()}
        self._always = list(other._always)

    def candidates(self, dirty: Collection[str]) -> Sequence[int]:
        """Registration indices of suggestors under a dirty key or always candidates, sorted
        (a copy: a suggestor registered while a cycle runs joins the next one)."""
        by_key = self._by_key
        if len(dirty) == 1 and not self._always:
            for key in dirty:
                return tuple(by_key.get(key, _NONE))
        found: set[int] = set(self._always)
        for key in dirty:
            listed = by_key.get(key)
            if listed is not None:
                found.update(listed)
        return sorted(found)

    @property
    def names(self) -> frozenset[str]:
        """The names of the registered suggestors."""
        return frozenset(self._names)

    def __len__(self) -> int:
        return len(self.suggestors)


# Registries made from a tuple of suggestors (the tuple kept alive with its registry).
_MADE: dict[int, tuple[tuple[Suggestor, ...], frozenset[str], Registry]] = {}
_KEEP = 16
