"""The render-time template context (docs/architecture.md §3), built once per view version.

`RenderScopes.scope(view)` returns the dict every template and expression of a
cycle renders over: `facts.<key>` (facts of every declared key, in promotion
order), `proposals.<key>`, `count(key)`, `has(key)`, `fact(key, id)`,
`data_of(key)` (the data of the key's facts, in promotion order), `cycle`,
`inputs`, plus the bounded `range`. The dict is cached on the identity and
version of the view, so the N candidates of a cycle share one build. Treat it
as read-only; add `item`/`index` with `with_item`.

`own_sources(view, key)` is the index the idempotent default uses: the
provenance sources that already hold facts or pending proposals under `key`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl.engine.types import ContextView, Fact, FrozenDict, ProposedFact
from converge_dsl.template_names import CONTEXT_NAMES, FACT_FIELDS
from converge_dsl.templating import GLOBALS, register_record

# A template reading a field a fact lacks is told the fields (`fact.contnet`).
register_record(Fact, "a fact", FACT_FIELDS)
register_record(ProposedFact, "a proposal", FACT_FIELDS)
register_record(FrozenDict, "the object")  # data: its fields are its keys


class RenderScopes:
    """A one-entry cache of the render scope of the latest view version."""

    __slots__ = ("_inputs", "_key", "_keys", "_own", "_scope", "names")

    def __init__(self, keys: tuple[str, ...], inputs: Mapping[str, Any] | None = None) -> None:
        self._keys = keys
        self._inputs = dict(inputs or {})
        self._key: tuple[int, int, int] | None = None
        self._scope: dict[str, Any] = {}
        self._own: dict[str, frozenset[str]] = {}
        self.names: frozenset[str] = CONTEXT_NAMES

    def _fresh(self, view: ContextView) -> None:
        key = (id(view), view.version, view.cycle)
        if key == self._key:
            return
        self._key = key
        self._own = {}

        def fact(key: str, fact_id: str) -> Fact | None:
            return view.fact(str(key), str(fact_id))

        def data_of(key: str) -> list[Any]:
            return [f.data for f in view.get(str(key))]

        self._scope = {
            **GLOBALS,
            "facts": {k: view.get(k) for k in self._keys},
            "proposals": {k: view.proposals(k) for k in self._keys},
            "count": lambda key: view.count(str(key)),
            "has": lambda key: view.has(str(key)),
            "fact": fact,
            "data_of": data_of,
            "cycle": view.cycle,
            "inputs": self._inputs,
        }

    def scope(self, view: ContextView) -> dict[str, Any]:
        self._fresh(view)
        return self._scope

    def own_sources(self, view: ContextView, key: str) -> frozenset[str]:
        self._fresh(view)
        found = self._own.get(key)
        if found is None:
            found = frozenset(f.provenance.source for f in view.get(key)) | frozenset(
                p.provenance.source for p in view.proposals(key)
            )
            self._own[key] = found
        return found


def with_item(scope: dict[str, Any], item: Any, index: int) -> dict[str, Any]:
    """The scope of an llm output template: the cycle scope plus `item` and `index`."""
    return {**scope, "item": item, "index": index}
