"""The suggestor kind `counter`, from a distribution of its own (not converge-dsl).

A `counter` proposes one fact per number from `from` (default 1) to `to` to its
`target`, each fact's content its `label` template (default `{{ n }}`), which
sees the pipeline's names plus `n`. It brings its schema branch, a check (the
range is not empty: `COUNTER01`), a builder and a graph style, and registers
itself through the entry point `converge_dsl.kinds: counter`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from converge_dsl.diagnostics import Diagnostic, JsonPath
from converge_dsl.frontend import (
    GraphStyle,
    PipelineFacts,
    SuggestorKind,
    SuggestorSpec,
    TemplateSite,
)
from converge_dsl.sandbox import CONTEXT_NAMES

EMPTY_RANGE = "COUNTER01"
LABEL_NAMES = CONTEXT_NAMES | {"n"}

SCHEMA = {
    "counterSuggestor": {
        "type": "object",
        "description": "Proposes one fact per number from `from` to `to`.",
        "properties": {
            "name": {"$ref": "#/$defs/name"},
            "kind": {"const": "counter"},
            "dependencies": {"$ref": "#/$defs/keyList"},
            "when": {"$ref": "#/$defs/expression"},
            "description": {"type": "string"},
            "target": {"$ref": "#/$defs/key"},
            "from": {"type": "integer", "minimum": 0},
            "to": {"type": "integer", "minimum": 0, "maximum": 1000},
            "label": {"$ref": "#/$defs/template"},
        },
        "additionalProperties": False,
        "required": ["name", "kind", "target", "to"],
    }
}


class CounterSpec(SuggestorSpec):
    __slots__ = ()

    @property
    def numbers(self) -> range:
        return range(int(self.raw.get("from", 1)), int(self.raw["to"]) + 1)

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        label = (("label",), self.raw.get("label"), LABEL_NAMES, False)
        return (*super().templates(extra), *self.sites(extra, [label]))


def parse_counter(path: JsonPath, raw: Mapping[str, Any]) -> CounterSpec:
    return CounterSpec.common("counter", path, raw, (str(raw.get("target", "")),))


def empty_range(facts: PipelineFacts) -> Iterator[Diagnostic]:
    for spec in facts.specs:
        if isinstance(spec, CounterSpec) and not spec.numbers:
            yield facts.error(
                EMPTY_RANGE,
                f"counter {spec.name!r} counts nothing: `from` is above `to`",
                (*spec.path, "to"),
                hint="make `to` at least `from`",
            )


class CounterSuggestor:
    """The compiled counter (the engine's `Suggestor` protocol)."""

    def __init__(self, core: Any, label: Any, numbers: range, target: str) -> None:
        self.core, self.label, self.numbers, self.target = core, label, numbers, target

    @property
    def name(self) -> str:
        return str(self.core.name)

    @property
    def dependencies(self) -> tuple[str, ...]:
        return tuple(self.core.dependencies)

    @property
    def span(self) -> Any:
        return self.core.span

    def accepts(self, view: Any) -> bool:
        return bool(self.core.accepts(view))

    async def execute(self, view: Any) -> Any:
        from converge_dsl.engine.types import AgentEffect, ProposedFact, Provenance

        scope = self.core.scopes.scope(view)
        proposals = []
        for n in self.numbers:
            content = self.label.render({**scope, "n": n}, suggestor=self.name, cycle=view.cycle)
            proposals.append(
                ProposedFact(
                    key=self.target,
                    id=f"{self.name}-{n}",
                    content=content,
                    confidence=1.0,
                    provenance=Provenance(self.core.source),
                    data={"n": n},
                )
            )
        return AgentEffect(tuple(proposals))

    def provenance(self) -> Any:
        from converge_dsl.engine.types import Provenance

        return Provenance(self.core.source)

    def complexity_hint(self) -> str | None:
        return f"O(n), n = {len(self.numbers)}"


def build_counter(spec: CounterSpec, ctx: Any) -> CounterSuggestor:
    from converge_dsl.compiler import SuggestorCore

    target, path = spec.targets[0], spec.path
    text = str(spec.raw.get("label", "{{ n }}"))
    label = ctx.template(text, (*path, "label"), extra=frozenset({"n"}))
    return CounterSuggestor(SuggestorCore.of(spec, ctx), label, spec.numbers, target)


COUNTER = SuggestorKind(
    "counter",
    "counterSuggestor",
    SCHEMA,
    parse_counter,
    (empty_range,),
    build_counter,
    GraphStyle("#fee2e2", "#b91c1c", "#7f1d1d", "hexagon", "counter"),
)
