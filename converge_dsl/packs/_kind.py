"""The `pack` suggestor kind: its typed spec, builder and registration (docs/architecture.md §16).

Light on purpose (validate imports it for a pipeline with a pack suggestor);
the lock and pack checks stay with the `packs:` section they read
(`converge_dsl.validation.check_packs`), the builder imports `_compile` on use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend import GraphStyle, SuggestorKind, SuggestorSpec


class PackSuggestorSpec(SuggestorSpec):
    """A `pack` suggestor: `use` names PACK/SUGGESTOR; it reads `input`, writes `output`."""

    __slots__ = ()

    @property
    def use(self) -> str:
        return str(self.raw["use"])

    @property
    def pack(self) -> str:
        return self.use.split("/", 1)[0]

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        fields = ("input", "output")
        own = tuple(
            ((*self.path, f), self.raw[f]) for f in fields if isinstance(self.raw.get(f), str)
        )
        return (*super().key_references(), *own)

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
    return PackSuggestorSpec.common("pack", path, raw, (str(raw.get("output", "")),))


PACK = SuggestorKind(
    "pack",
    "packSuggestor",
    None,
    parse_pack_spec,
    (),
    "converge_dsl.packs._compile:compile_pack_suggestor",
    GraphStyle("#ccfbf1", "#0d9488", "#134e4a", "box", "pack suggestor"),
)
