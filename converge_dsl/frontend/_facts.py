"""What semantic checks read: `PipelineFacts` and the `Check` protocol.

A check is `Check = Callable[[PipelineFacts], Iterator[Diagnostic]]`: it reads
the facts (document, data, source map, declared keys/models/packs/inputs)
and yields diagnostics built with `facts.error(...)` / `facts.warning(...)`.
Checks run only on documents that passed the JSON Schema, so they may trust
the shapes the schema guarantees.

Facts made with `previous` (the facts of an earlier text of the same pipeline,
as an editor checks one text after another) take the suggestor specs and
their template sites of the entries whose data is the very same object
(`KindRegistry.specs`): those are functions of that data and place alone.
Every other index is built afresh, so the checks see what they would see
without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from converge_dsl._escapes import quoted
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity
from converge_dsl.frontend._kinds import KindRegistry, SuggestorKind, SuggestorSpec, TemplateSite
from converge_dsl.frontend._manifest import InvariantSpec, PipelineManifest, build_manifest
from converge_dsl.frontend.document import LoadedDocument, SourceMap
from converge_dsl.keys import BUILTIN_KEYS
from converge_dsl.sandbox import CONTEXT_NAMES


class PipelineFacts:
    """What checks read: the document plus indexes derived from it once.

    A plain class (its indexes are `cached_property`s, which need an instance
    `__dict__`); treat it as immutable.
    """

    def __init__(
        self,
        document: LoadedDocument,
        base_dir: Path | None = None,
        kinds: KindRegistry | None = None,
        *,
        previous: PipelineFacts | None = None,
    ) -> None:
        from converge_dsl.frontend._registry import KINDS

        self.document = document
        self.base_dir = base_dir  # folder of the pipeline file, for relative paths
        self.kinds = KINDS if kinds is None else kinds
        # What `previous` had built (never `previous` itself: no chain of old facts is kept).
        made = vars(previous) if previous is not None and previous.kinds is self.kinds else {}
        self._earlier_specs: tuple[SuggestorSpec, ...] = made.get("specs", ())
        self._earlier_sites: tuple[
            tuple[SuggestorSpec | InvariantSpec, tuple[TemplateSite, ...]], ...
        ] = made.get("owned_templates", ())

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

    @cached_property
    def specs(self) -> tuple[SuggestorSpec, ...]:
        """The typed suggestor specs, in registration order."""
        specs = tuple(self.kinds.specs(self.data, self._earlier_specs))
        self._earlier_specs = ()
        return specs

    @cached_property
    def kinds_used(self) -> tuple[SuggestorKind, ...]:
        """The kinds the pipeline's suggestors are of, in order of first use."""
        names = dict.fromkeys(spec.kind for spec in self.specs)
        return tuple(self.kinds.kind(name) for name in names)

    @cached_property
    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        """Every place that names a context key, with the key."""
        refs: list[tuple[JsonPath, str]] = []
        for i, seed in enumerate(self.data.get("seeds", [])):
            if "key" in seed:
                refs.append((("seeds", i, "key"), seed["key"]))
        gated = self.manifest.promotion.gated_keys or ()
        refs.extend((("promotion", "gated_keys", i), key) for i, key in enumerate(gated))
        for spec in self.specs:
            refs.extend(spec.key_references())
        return tuple(refs)

    @cached_property
    def produced_keys(self) -> frozenset[str]:
        """Keys that can ever hold facts (seeds, every suggestor's targets, diagnostics)."""
        keys = {"diagnostic"}
        keys.update(seed.get("key", "seeds") for seed in self.data.get("seeds", []))
        for spec in self.specs:
            keys.update(spec.targets)
        return frozenset(keys)

    @cached_property
    def templates(self) -> tuple[TemplateSite, ...]:
        """Every template and expression, with the names valid where it sits."""
        return tuple(site for _, sites in self.owned_templates for site in sites)

    @cached_property
    def owned_templates(
        self,
    ) -> tuple[tuple[SuggestorSpec | InvariantSpec, tuple[TemplateSite, ...]], ...]:
        """Each suggestor's and invariant's templates and expressions, in document order."""
        earlier = {id(owner): (owner, sites) for owner, sites in self._earlier_sites}
        self._earlier_sites = ()
        owned: list[tuple[SuggestorSpec | InvariantSpec, tuple[TemplateSite, ...]]] = []
        for spec in self.specs:
            owner, made = earlier.get(id(spec), (None, ()))
            owned.append((spec, made if owner is spec else spec.templates()))
        for invariant in self.manifest.invariants:
            path = invariant.path
            sites = [TemplateSite((*path, "check"), invariant.check, True, CONTEXT_NAMES)]
            if invariant.message is not None:
                sites.append(
                    TemplateSite((*path, "message"), invariant.message, False, CONTEXT_NAMES)
                )
            owned.append((invariant, tuple(sites)))
        return tuple(owned)

    def duplicates(
        self, items: Iterable[tuple[JsonPath, str]], code: str, what: str
    ) -> Iterator[Diagnostic]:
        """An error at each (path, name) whose name came before, naming the first's line."""
        first: dict[str, JsonPath] = {}
        for path, name in items:
            if name in first:
                line = self.source_map.span(first[name]).line
                yield self.error(
                    code,
                    f"{what} {quoted(name)} is defined twice",
                    path,
                    hint=f"the first one is on line {line}; names must be unique",
                )
            else:
                first[name] = path

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
