"""The `pack` suggestor kind: its typed spec, builder and registration (docs/architecture.md §16).

Light on purpose (validate imports it for a pipeline with a pack suggestor);
the lock and pack checks stay with the `packs:` section they read
(`converge_dsl.validation.check_packs`), the builder imports `_compile` on use.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from converge_dsl._json_types import JsonObject
from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend import GraphStyle, SpecHead, SuggestorKind, SuggestorSpec


class PackSuggestorSpec(SuggestorSpec):
    """A `pack` suggestor: `use` names PACK/SUGGESTOR (`pack`, `suggestor`); it reads its
    `input` key and writes its `output` key (the bindings), with `parameters` (its
    `with:` values, checked against the pack's parameters schema; empty when not
    written)."""

    _fields = (*SuggestorSpec._fields, "use", "input", "output", "parameters")
    __slots__ = ("input", "output", "parameters", "use")

    def __init__(
        self,
        head: SpecHead,
        *,
        use: str,
        input: str,
        output: str,
        parameters: JsonObject,
    ) -> None:
        super().__init__(*head)
        self.use = use
        self.input = input
        self.output = output
        self.parameters = parameters

    @property
    def pack(self) -> str:
        return self.use.split("/", 1)[0]

    @property
    def suggestor(self) -> str:
        """The pack's suggestor it uses (after the `/` of `use`; empty when there is none)."""
        return self.use.partition("/")[2]

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        own = (*self.references("input", self.input), *self.references("output", self.output))
        return (*self.dependency_references(), *own)

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return ()

    def triggers(self) -> tuple[str, ...]:
        """Its dependencies, else its `input` (what the compiled suggestor is indexed under)."""
        return self.dependencies or ((str(self.raw["input"]),) if "input" in self.raw else ())

    def models_used(self) -> frozenset[str]:
        return frozenset({"default"})  # a pack's llm or agent template runs on model `default`

    def pack_references(self) -> tuple[tuple[JsonPath, str], ...]:
        return (((*self.path, "use"), self.pack),)

    def details(self) -> tuple[tuple[str, str], ...]:
        return (("uses", self.use),)


def parse_pack_spec(path: JsonPath, raw: Mapping[str, Any]) -> PackSuggestorSpec:
    output = str(raw.get("output", ""))
    return PackSuggestorSpec(
        SuggestorSpec.head("pack", path, raw, (output,)),
        use=str(raw.get("use", "")),
        input=str(raw.get("input", "")),
        output=output,
        parameters=MappingProxyType(dict(raw.get("with") or {})),
    )


PACK = SuggestorKind(
    "pack",
    "packSuggestor",
    None,
    parse_pack_spec,
    (),
    "converge_dsl.packs._compile:compile_pack_suggestor",
    GraphStyle("#ccfbf1", "#0d9488", "#134e4a", "box", "pack suggestor"),
)


def pack_suggestors(data: Mapping[str, Any]) -> Iterator[PackSuggestorSpec]:
    """The pipeline's pack suggestors, typed."""
    for index, item in enumerate(data.get("suggestors") or ()):
        if isinstance(item, Mapping) and item.get("kind") == "pack":
            yield parse_pack_spec(("suggestors", index), item)
