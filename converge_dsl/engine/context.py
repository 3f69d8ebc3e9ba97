"""The context: an append-only fact store that suggestors read through `ContextView`.

`Context` keeps one list of facts per key (in promotion order), an index by
key then id (no tuple per fact), an index of the provenance sources under each key, and the
global promotion order. Reads are O(1) (the tuple a `get` returns is cached
until the key grows). A reader that caches what it derives from a context
(the compiler's render scopes) catches up through `facts_since(version)` and
`pending_version`, touching only the keys that changed. Only the engine writes to a
context, through a `ContextWriter` (engine-internal); suggestors see it as a
read-only `ContextView` and never between the start of a cycle's `execute`
calls and the end of their merge, so the view they read is stable for the
whole cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from converge_dsl.engine.types import Fact, ProposedFact, key_sort_key

_EMPTY: tuple[Fact, ...] = ()
_NO_PROPOSALS: tuple[ProposedFact, ...] = ()


class Context:
    """Append-only facts by key, plus proposals pending a human decision.

    Implements the `ContextView` protocol. `version` is the number of facts
    promoted so far; `cycle` the engine cycle being run (0 before the first).
    """

    __slots__ = (
        "_by_key",
        "_cache",
        "_cycle",
        "_index",
        "_order",
        "_pending",
        "_pending_sources",
        "_pending_version",
        "_sources",
    )

    def __init__(self) -> None:
        self._by_key: dict[str, list[Fact]] = {}
        self._cache: dict[str, tuple[Fact, ...]] = {}
        self._index: dict[str, dict[str, Fact]] = {}
        self._order: list[Fact] = []
        self._sources: dict[str, set[str]] = {}
        self._pending: dict[str, tuple[ProposedFact, ...]] = {}
        self._pending_sources: dict[str, frozenset[str]] = {}
        self._pending_version = 0
        self._cycle = 0

    @classmethod
    def from_facts(
        cls,
        facts: Iterable[Fact],
        *,
        cycle: int = 0,
        pending: Iterable[ProposedFact] = (),
    ) -> Context:
        """A context holding `facts` (in the given order); for tests and restores.

        A second fact with the same `(key, id)` is ignored (facts are unique by key and id).
        """
        ctx = cls()
        writer = ContextWriter(ctx)
        for fact in facts:
            if ctx.fact(fact.key, fact.id) is None:
                writer.add_fact(fact)
        writer.set_cycle(cycle)
        writer.set_pending(pending)
        return ctx

    # -- ContextView ---------------------------------------------------------

    @property
    def version(self) -> int:
        return len(self._order)

    @property
    def cycle(self) -> int:
        return self._cycle

    def get(self, key: str) -> tuple[Fact, ...]:
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        facts = self._by_key.get(key)
        if facts is None:
            return _EMPTY
        frozen = tuple(facts)
        self._cache[key] = frozen
        return frozen

    def has(self, key: str) -> bool:
        return key in self._by_key

    def count(self, key: str) -> int:
        facts = self._by_key.get(key)
        return 0 if facts is None else len(facts)

    def fact(self, key: str, fact_id: str) -> Fact | None:
        ids = self._index.get(key)
        return None if ids is None else ids.get(fact_id)

    def proposals(self, key: str) -> tuple[ProposedFact, ...]:
        return self._pending.get(key, _NO_PROPOSALS)

    def keys(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_key, key=key_sort_key))

    # -- indexes and change tracking -------------------------------------------

    def holds_source(self, key: str, source: str) -> bool:
        """Whether a fact or a pending proposal under `key` has provenance `source` (O(1))."""
        sources = self._sources.get(key)
        if sources is not None and source in sources:
            return True
        pending = self._pending_sources.get(key)
        return pending is not None and source in pending

    def facts_since(self, version: int) -> list[Fact]:
        """The facts promoted after `version`, in promotion order (O(facts returned))."""
        return self._order[version:]

    @property
    def pending_version(self) -> int:
        """Increases every time the pending proposals are replaced."""
        return self._pending_version

    def pending_keys(self) -> frozenset[str]:
        """The keys that have pending proposals."""
        return frozenset(self._pending)

    # -- whole-context reads -------------------------------------------------

    def facts(self) -> tuple[Fact, ...]:
        """Every fact in promotion order (O(n): for results and snapshots, not hot paths)."""
        return tuple(self._order)

    def pending(self) -> tuple[ProposedFact, ...]:
        """Every pending proposal, keys in key sort order, each key in arrival order."""
        ordered = sorted(self._pending, key=key_sort_key)
        return tuple(p for key in ordered for p in self._pending[key])

    def __iter__(self) -> Iterator[Fact]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __repr__(self) -> str:
        return f"Context(facts={len(self._order)}, keys={list(self.keys())}, cycle={self._cycle})"


class ContextWriter:
    """Write access to one `Context`. Engine-internal: suggestors only ever see the read-only view.

    The engine's run promotes facts, advances the cycle and publishes the
    proposals pending a human through a writer; `Context` itself has no
    public mutators. The writer enforces nothing: its caller (the engine's
    admission) has already applied the kernel rules (see `add_fact`).
    """

    __slots__ = ("_by_key", "_cache", "_ctx", "_index", "_order", "_sources")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        # The containers are never rebound, so the writer holds them directly.
        self._by_key = ctx._by_key
        self._cache = ctx._cache
        self._index = ctx._index
        self._order = ctx._order
        self._sources = ctx._sources

    @property
    def context(self) -> Context:
        """The context written to."""
        return self._ctx

    def add_fact(self, fact: Fact) -> None:
        """Append `fact`. The caller has checked that `(key, id)` is new."""
        key = fact.key
        bucket = self._by_key.get(key)
        if bucket is None:
            self._by_key[key] = [fact]
            self._sources[key] = {fact.provenance.source}
            self._index[key] = {fact.id: fact}
        else:
            bucket.append(fact)
            self._cache.pop(key, None)
            self._sources[key].add(fact.provenance.source)
            self._index[key][fact.id] = fact
        self._order.append(fact)

    def set_cycle(self, cycle: int) -> None:
        """Set the cycle `ContextView.cycle` reports."""
        self._ctx._cycle = cycle

    def set_pending(self, proposals: Iterable[ProposedFact]) -> None:
        """Replace the proposals pending a human (`ContextView.proposals`), grouped by key."""
        grouped: dict[str, list[ProposedFact]] = {}
        for proposal in proposals:
            grouped.setdefault(proposal.key, []).append(proposal)
        ctx = self._ctx
        ctx._pending = {key: tuple(items) for key, items in grouped.items()}
        ctx._pending_sources = {
            key: frozenset(p.provenance.source for p in items) for key, items in grouped.items()
        }
        ctx._pending_version += 1
