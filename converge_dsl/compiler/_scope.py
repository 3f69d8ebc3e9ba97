"""The render-time template context (docs/architecture.md §3), kept up to date by what changed.

`RenderScopes.scope(view)` returns the dict every template and expression of a
cycle renders over: `facts.<key>` (facts of every declared key, in promotion
order), `proposals.<key>`, `count(key)`, `has(key)`, `fact(key, id)`,
`data_of(key)` (the data of the key's facts, in promotion order), `cycle`,
`inputs`, plus the bounded `range`. The dict is cached on the view and its
version, cycle and pending proposals, so the N candidates of a cycle share one
build. Treat it as read-only; add `item`/`index` with `with_item`. The scopes
of the last `KEEP_VIEWS` views are kept: the suggestors of a pipeline loaded
once serve all its runs, and a batch's runs take turns on one event loop.

Linear by construction: the `facts` and `proposals` maps are built over every
declared key once per view; after that, a new version of the same `Context`
updates only the keys of the facts promoted since (`Context.facts_since`) and
of the pending proposals when they are replaced, so a run costs time in
proportion to what it promotes, never keys x cycles. Each new version still
gets a new scope dict (its `facts` and `proposals` maps are shared and updated
in place), so a cache keyed on the scope's identity sees every change.

`owns(view, key, source)` is the idempotent default's question (does `source`
already hold a fact or a pending proposal under `key`?), answered from the
context's source index in O(1); `own_sources(view, key)` is the set itself.
"""

from __future__ import annotations

from typing import Any

from converge_dsl._json_types import JsonObject
from converge_dsl.engine import Context
from converge_dsl.engine.types import ContextView, Fact, FrozenDict, ProposedFact
from converge_dsl.sandbox import CONTEXT_NAMES, FACT_FIELDS, GLOBALS, register_record

# A template reading a field a fact lacks is told the fields (`fact.contnet`).
register_record(Fact, "a fact", FACT_FIELDS)
register_record(ProposedFact, "a proposal", FACT_FIELDS)
register_record(FrozenDict, "the object")  # data: its fields are its keys

# (version, cycle, pending version) of the view a scope was built for.
_Stamp = tuple[int, int, int]
# The views whose scopes are kept (the latest used): one per run at once, since the
# suggestors of a pipeline loaded once serve every run of a batch (16 at once by
# default), whose runs take turns on the event loop. A view past this many is built
# from scratch again when it comes back; a kept view holds its context alive.
KEEP_VIEWS = 32


class _ViewScope:
    """The scope of one view: the facts and proposals maps, kept up to date."""

    __slots__ = ("facts", "helpers", "own", "pending_keys", "proposals", "scope", "stamp", "view")

    def __init__(self, view: ContextView) -> None:
        self.view = view
        self.stamp: _Stamp = (-1, -1, -1)
        self.scope: dict[str, Any] = {}
        self.facts: dict[str, tuple[Fact, ...]] = {}
        self.proposals: dict[str, tuple[ProposedFact, ...]] = {}
        self.pending_keys: frozenset[str] = frozenset()
        self.helpers: dict[str, Any] = {}
        self.own: dict[str, frozenset[str]] = {}


class RenderScopes:
    """The render scope of the latest version of each view, updated by the keys that changed.

    The scopes of the last `KEEP_VIEWS` views are kept, so runs that take turns
    (a batch's cases on one loop) do not build each other's from scratch.
    """

    __slots__ = ("_declared", "_inputs", "_keys", "_last", "_views", "names")

    def __init__(self, keys: tuple[str, ...], inputs: JsonObject | None = None) -> None:
        self._keys = keys
        self._declared = frozenset(keys)
        self._inputs = dict(inputs or {})
        self._last: _ViewScope | None = None
        self._views: dict[int, _ViewScope] = {}  # by the view's id; the view is held
        self.names: frozenset[str] = CONTEXT_NAMES

    def _fresh(self, view: ContextView) -> _ViewScope:
        context = view if isinstance(view, Context) else None
        stamp = (view.version, view.cycle, 0 if context is None else context.pending_version)
        kept = self._last
        if kept is None or kept.view is not view:
            kept = self._kept(view)
        if stamp == kept.stamp:
            return kept
        if context is not None and kept.stamp[0] != -1 and stamp[0] >= kept.stamp[0]:
            self._advance(kept, context)
        else:
            self._rebuild(kept, view)
        kept.stamp = stamp
        kept.own = {}
        kept.scope = {
            **GLOBALS,
            "facts": kept.facts,
            "proposals": kept.proposals,
            **kept.helpers,
            "cycle": view.cycle,
            "inputs": self._inputs,
        }
        return kept

    def _kept(self, view: ContextView) -> _ViewScope:
        """The kept scope of `view` (a new one, unbuilt, if it has none), now the latest."""
        views = self._views
        kept = views.pop(id(view), None)
        if kept is None:
            kept = _ViewScope(view)
            if len(views) >= KEEP_VIEWS:
                del views[next(iter(views))]  # the one used longest ago
        views[id(view)] = self._last = kept
        return kept

    def _rebuild(self, kept: _ViewScope, view: ContextView) -> None:
        """Every declared key from scratch: once per view."""
        kept.facts = {k: view.get(k) for k in self._keys}
        kept.proposals = {k: view.proposals(k) for k in self._keys}
        kept.pending_keys = view.pending_keys() if isinstance(view, Context) else frozenset()
        kept.helpers = _helpers(view)

    def _advance(self, kept: _ViewScope, view: Context) -> None:
        """Only the keys of the facts promoted, and the proposals replaced, since the last build."""
        declared, facts = self._declared, kept.facts
        for key in {fact.key for fact in view.facts_since(kept.stamp[0])}:
            if key in declared:
                facts[key] = view.get(key)
        if view.pending_version != kept.stamp[2]:
            pending = view.pending_keys()
            for key in (pending | kept.pending_keys) & declared:
                kept.proposals[key] = view.proposals(key)
            kept.pending_keys = pending

    def scope(self, view: ContextView) -> dict[str, Any]:
        return self._fresh(view).scope

    def owns(self, view: ContextView, key: str, source: str) -> bool:
        """Whether `source` holds a fact or a pending proposal under `key` (O(1) on a `Context`).

        Reads no state of its own for a `Context`, so a subclass that delegates
        `own_sources` and skips `__init__` still answers it.
        """
        if isinstance(view, Context):
            return view.holds_source(key, source)
        return source in self.own_sources(view, key)

    def own_sources(self, view: ContextView, key: str) -> frozenset[str]:
        """The provenance sources of the facts and pending proposals under `key`."""
        own = self._fresh(view).own
        found = own.get(key)
        if found is None:
            found = frozenset(f.provenance.source for f in view.get(key)) | frozenset(
                p.provenance.source for p in view.proposals(key)
            )
            own[key] = found
        return found


def _helpers(view: ContextView) -> dict[str, Any]:
    """The scope's functions over `view`: they read it live, so one set serves every version."""

    def fact(key: str, fact_id: str) -> Fact | None:
        return view.fact(str(key), str(fact_id))

    def data_of(key: str) -> list[Any]:
        return [f.data for f in view.get(str(key))]

    return {
        "count": lambda key: view.count(str(key)),
        "has": lambda key: view.has(str(key)),
        "fact": fact,
        "data_of": data_of,
    }


def with_item(scope: dict[str, Any], item: Any, index: int) -> dict[str, Any]:
    """The scope of an llm output template: the cycle scope plus `item` and `index`."""
    return {**scope, "item": item, "index": index}
