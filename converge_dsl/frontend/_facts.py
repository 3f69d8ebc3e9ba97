"""What semantic checks read: `PipelineFacts`, the template sites, and the `Check` protocol.

A check is `Check = Callable[[PipelineFacts], Iterator[Diagnostic]]`: it reads
the facts (document, data, source map, declared keys/models/packs/inputs)
and yields diagnostics built with `facts.error(...)` / `facts.warning(...)`.
Checks run only on documents that passed the JSON Schema, so they may trust
the shapes the schema guarantees.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity
from converge_dsl.frontend._manifest import PipelineManifest, build_manifest
from converge_dsl.frontend.document import LoadedDocument, SourceMap
from converge_dsl.keys import BUILTIN_KEYS
from converge_dsl.template_names import CONTEXT_NAMES

# Extra names per place on top of `CONTEXT_NAMES`, which every template sees
# (docs/architecture.md §3).
ITEM_NAMES = CONTEXT_NAMES | {"item", "index"}
TURN_NAMES = CONTEXT_NAMES | {"goal", "turn", "conversation"}
# A summarizer prompt is rendered with the cleared span only (agents/_summarizer.py).
SUMMARY_NAMES = frozenset({"span"})


class TemplateSite(Record):
    """One template or expression in the pipeline and the names it may read."""

    _fields = ("path", "text", "expression", "names")
    __slots__ = _fields

    def __init__(self, path: JsonPath, text: str, expression: bool, names: frozenset[str]) -> None:
        self.path = path
        self.text = text
        self.expression = expression
        self.names = names


def suggestor_sites(
    path: JsonPath, s: Mapping[str, Any], extra: frozenset[str] = frozenset()
) -> list[TemplateSite]:
    """The templates and expressions of one suggestor body at `path`.

    `extra` names are readable everywhere in it (a pack template's `params`).
    """
    sites: list[TemplateSite] = []

    def add(where: JsonPath, value: Any, names: frozenset[str], expression: bool = False) -> None:
        if isinstance(value, str):
            sites.append(TemplateSite(where, value, expression, names | extra))

    add((*path, "when"), s.get("when"), CONTEXT_NAMES, expression=True)
    for j, fact in enumerate(s.get("facts", ())):
        for field in ("id", "content"):
            add((*path, "facts", j, field), fact.get(field), CONTEXT_NAMES)
    for j, emit in enumerate(s.get("emit", ())):
        for field in ("id", "content", "confidence"):
            add((*path, "emit", j, field), emit.get(field), CONTEXT_NAMES)
        add((*path, "emit", j, "data"), emit.get("data"), CONTEXT_NAMES, expression=True)
    for field in ("system", "user"):
        add((*path, "prompt", field), s.get("prompt", {}).get(field), CONTEXT_NAMES)
    if s.get("kind") == "llm":
        output = s.get("output", {})
        for field in ("id", "content", "confidence"):
            add((*path, "output", field), output.get(field), ITEM_NAMES)
        add((*path, "output", "data"), output.get("data"), ITEM_NAMES, expression=True)
    add((*path, "goal"), s.get("goal"), CONTEXT_NAMES)
    for j, contributor in enumerate(s.get("contributors", ())):
        for field in ("text", "template"):
            add((*path, "contributors", j, field), contributor.get(field), TURN_NAMES)
    add((*path, "summarizer", "prompt"), s.get("summarizer", {}).get("prompt"), SUMMARY_NAMES)
    return sites


class PipelineFacts:
    """What checks read: the document plus indexes derived from it once.

    A plain class (its indexes are `cached_property`s, which need an instance
    `__dict__`); treat it as immutable.
    """

    def __init__(self, document: LoadedDocument, base_dir: Path | None = None) -> None:
        self.document = document
        self.base_dir = base_dir  # folder of the pipeline file, for relative paths

    @property
    def data(self) -> Mapping[str, Any]:
        data: Mapping[str, Any] = self.document.data
        return data

    @property
    def source_map(self) -> SourceMap:
        return self.document.source_map

    @cached_property
    def manifest(self) -> PipelineManifest:
        """The typed declarations of the document (docs/architecture.md §4)."""
        return build_manifest(self.document)

    @cached_property
    def declared_keys(self) -> frozenset[str]:
        """Built-in keys plus those under `keys:`."""
        return frozenset(BUILTIN_KEYS) | {k.name for k in self.manifest.keys}

    @cached_property
    def key_schemas(self) -> Mapping[str, Any]:
        """Declared key -> its `schema` (only keys that have one)."""
        return {k.name: k.schema for k in self.manifest.keys if isinstance(k.schema, dict)}

    @cached_property
    def models(self) -> frozenset[str]:
        return frozenset(self.manifest.models)

    @cached_property
    def packs(self) -> frozenset[str]:
        return frozenset(p.name for p in self.manifest.packs)

    @cached_property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.manifest.inputs)

    @property
    def suggestors(self) -> Iterator[tuple[JsonPath, Mapping[str, Any]]]:
        """(path, suggestor) in registration order."""
        for index, suggestor in enumerate(self.data.get("suggestors", [])):
            yield ("suggestors", index), suggestor

    @cached_property
    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        """Every place that names a context key, with the key."""
        refs: list[tuple[JsonPath, str]] = []

        def many(path: JsonPath, keys: Any) -> None:
            refs.extend(((*path, i), key) for i, key in enumerate(keys or ()))

        for i, seed in enumerate(self.data.get("seeds", [])):
            if "key" in seed:
                refs.append((("seeds", i, "key"), seed["key"]))
        many(("promotion", "gated_keys"), self.manifest.promotion.gated_keys)
        for path, s in self.suggestors:
            many((*path, "dependencies"), s.get("dependencies"))
            for field in ("target", "input", "output") if s["kind"] == "pack" else ("target",):
                if field in s:
                    refs.append(((*path, field), s[field]))
            for j, emit in enumerate(s.get("emit", ())):
                refs.append(((*path, "emit", j, "key"), emit["key"]))
            for j, contributor in enumerate(s.get("contributors", ())):
                many((*path, "contributors", j, "keys"), contributor.get("keys"))
        return tuple(refs)

    @cached_property
    def produced_keys(self) -> frozenset[str]:
        """Keys that can ever hold facts (seeds, targets, emits, pack outputs, diagnostics)."""
        keys = {"diagnostic"}
        keys.update(seed.get("key", "seeds") for seed in self.data.get("seeds", []))
        for _, s in self.suggestors:
            kind = s["kind"]
            if kind == "seed":
                keys.add(s.get("target", "seeds"))
            elif kind == "rule":
                keys.update(emit["key"] for emit in s["emit"])
            elif kind == "pack":
                keys.add(s["output"])
            else:
                keys.add(s["target"])
        return frozenset(keys)

    @cached_property
    def templates(self) -> tuple[TemplateSite, ...]:
        """Every template and expression, with the names valid where it sits."""
        sites = [site for path, s in self.suggestors for site in suggestor_sites(path, s)]
        for invariant in self.manifest.invariants:
            path = invariant.path
            sites.append(TemplateSite((*path, "check"), invariant.check, True, CONTEXT_NAMES))
            if invariant.message is not None:
                sites.append(
                    TemplateSite((*path, "message"), invariant.message, False, CONTEXT_NAMES)
                )
        return tuple(sites)

    def error(
        self,
        code: str,
        message: str,
        path: JsonPath,
        *,
        hint: str | None = None,
        on_key: bool = False,
    ) -> Diagnostic:
        """An error located at `path` (at the key naming it with `on_key`)."""
        return self._at(code, message, path, hint=hint, on_key=on_key, severity=Severity.ERROR)

    def warning(
        self,
        code: str,
        message: str,
        path: JsonPath,
        *,
        hint: str | None = None,
        on_key: bool = False,
    ) -> Diagnostic:
        return self._at(code, message, path, hint=hint, on_key=on_key, severity=Severity.WARNING)

    def _at(
        self,
        code: str,
        message: str,
        path: JsonPath,
        *,
        hint: str | None,
        on_key: bool,
        severity: Severity,
    ) -> Diagnostic:
        return self.source_map.diagnostic(
            code, message, path, hint=hint, on_key=on_key, severity=severity
        )


Check = Callable[[PipelineFacts], Iterator[Diagnostic]]
