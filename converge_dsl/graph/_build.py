"""A `PipelineGraph` from a compiled pipeline (see `_model`).

Dependencies and targets are read from the compiled suggestors (what the
engine will index and what they propose to); the suggestor's kind, pack and
models, what its kind draws besides (`SuggestorSpec.side_reads`, `side_calls`,
`parts`), and every node's YAML source, from the validated document the
compiled pipeline carries, whose entries are in the same order as its
suggestors. A pack node shows the version the pipeline's lock pins (its
specifier when there is no lock). An invariant lists the keys its check reads
(`keys_read`).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from converge_dsl._page_assets import Names
from converge_dsl.compiler import CompiledPipeline
from converge_dsl.diagnostics import JsonPath
from converge_dsl.engine.types import Suggestor
from converge_dsl.frontend import GraphStyle, SuggestorSpec
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.keys import BUILTIN_KEYS

from ._model import Edge, GraphInvariant, Node, PipelineGraph, Source
from ._reach import Flow, reach

# Longer sources are cut, with a last line saying how many lines were left out.
MAX_EXCERPT_LINES = 40


def _targets(suggestor: Suggestor) -> tuple[str, ...]:
    """The keys a compiled suggestor proposes to (its core's targets, a solver's output)."""
    core = getattr(suggestor, "core", None)
    if core is not None:
        return tuple(core.targets)
    output = getattr(suggestor, "output_key", None)
    return (str(output),) if output else ()


class _Sources:
    """Source excerpts of document paths, the text split once."""

    def __init__(self, document: LoadedDocument) -> None:
        self.document = document
        self.lines = document.text.splitlines()

    def of(self, path: JsonPath) -> Source | None:
        location = self.document.source_map.get(path)
        if location is None:
            return None
        start = location.key_span or location.span
        end = location.span
        last = end.end_line
        # A block node ends where the next one starts: drop that line when only
        # indentation (or the next item's `- `) comes before the end.
        before = self.lines[last - 1][: end.end_column - 1] if last <= len(self.lines) else ""
        if last > start.line and not before.replace("-", " ").strip():
            last -= 1
        lines = self.lines[start.line - 1 : last]
        while len(lines) > 1 and (not lines[-1].strip() or lines[-1].lstrip().startswith("#")):
            lines.pop()
        if len(lines) > MAX_EXCERPT_LINES:
            left = len(lines) - MAX_EXCERPT_LINES + 1
            lines = [*lines[: MAX_EXCERPT_LINES - 1], f"... ({left} more lines)"]
        return Source(
            start.file, start.line, start.column, start.line + len(lines) - 1, tuple(lines)
        )


def _models_of(spec: SuggestorSpec, suggestor: Suggestor, declared: Mapping[str, Any]) -> list[str]:
    named = [name for _, name in spec.model_references()]
    names = [*named, getattr(suggestor, "model_name", None)]
    return [str(n) for n in dict.fromkeys(names) if n is not None and str(n) in declared]


def _called(spec: SuggestorSpec, suggestor: Suggestor, models: list[str]) -> list[str]:
    """The models of `calls` edges: all but those only a side call uses (a summarizer's)."""
    own = {str(spec.raw.get("model")), str(getattr(suggestor, "model_name", None))}
    side = {model for _, model in spec.side_calls()}
    return [m for m in models if m in own or m not in side]


def keys_read(check: str, keys: Sequence[str]) -> tuple[str, ...]:
    """The keys of `keys` an invariant's `check` reads, in `keys`' order: named by the
    context API (`count('k')`, `has('k')`, `fact('k', ...)`, `data_of('k')`) or through
    `facts.k`, `proposals.k`, `facts['k']`. Only known key names are looked for, so a
    string that is no key's name is never taken for one."""
    found = []
    for key in keys:
        name = re.escape(key)
        quoted = f"""['"]{name}['"]"""
        pattern = (
            rf"\b(?:count|has|fact|data_of)\(\s*{quoted}"
            rf"|\b(?:facts|proposals)(?:\.{name}\b|\[\s*{quoted}\s*\])"
        )
        if re.search(pattern, check):
            found.append(key)
    return tuple(found)


def _joined(names: Sequence[str], empty: str = "none") -> Names:
    return Names(names, empty)


def _suggestor_details(
    spec: SuggestorSpec, suggestor: Suggestor, flow: Flow, models: list[str], live: bool
) -> tuple[tuple[str, str], ...]:
    """What the HTML panel and the JSON say of a suggestor, in reading order."""
    details = [
        ("kind", spec.kind),
        ("reads", _joined(flow.dependencies, "nothing: always a candidate")),
        ("writes", _joined(flow.targets)),
        *spec.details(),
    ]
    if spec.when is not None:
        details.append(("when", spec.when))
    if models:
        details.append(("models", _joined(models)))
    if spec.description:
        details.append(("description", spec.description))
    hint = suggestor.complexity_hint()
    if hint:
        details.append(("complexity", hint))
    if not live:
        details.append(("never fires", "none of the keys it reads can ever hold a fact"))
    return tuple(details)


class _Builder:
    """Builds one graph: suggestors first (they make the edges), then keys, models
    and packs, which read the edges through one index."""

    def __init__(self, compiled: CompiledPipeline) -> None:
        self.compiled = compiled
        self.document = compiled.settings.document
        self.sources = _Sources(self.document)
        data = self.document.data
        self.kinds = compiled.registry
        self.specs = list(self.kinds.specs(data))
        self.manifest = compiled.settings.manifest
        self.key_specs = {k.name: k for k in self.manifest.keys}
        self.packs = frozenset(p.name for p in self.manifest.packs)
        self.flows = [Flow(s.name, tuple(s.dependencies), _targets(s)) for s in compiled.suggestors]
        seeded = [str(seed.key) for seed in compiled.seeds]
        self.seed_counts = Counter(seeded)
        self.reach = reach(seeded, self.flows)
        self.edges: list[Edge] = []
        self._ends: dict[tuple[str, str], list[str]] | None = None

    def build(self) -> PipelineGraph:
        suggestors = list(self._suggestors())
        nodes = [*self._keys(), *suggestors, *self._models(), *self._packs()]
        return PipelineGraph(
            name=self.compiled.name,
            file=self.compiled.file,
            description=str(self.document.data.get("description") or ""),
            nodes=tuple(nodes),
            edges=tuple(self.edges),
            invariants=tuple(self._invariants()),
            styles=self._styles(),
        )

    def _styles(self) -> tuple[tuple[str, GraphStyle], ...]:
        """Every registered kind's style, then those of other kinds the pipeline uses."""
        names = dict.fromkeys((*self.kinds.names, *(spec.kind for spec in self.specs)))
        return tuple((name, self.kinds.kind(name).graph) for name in names)

    def _suggestors(self) -> Iterator[Node]:
        declared = self.compiled.settings.models
        for index, (spec, suggestor, flow) in enumerate(
            zip(self.specs, self.compiled.suggestors, self.flows, strict=True)
        ):
            live = flow.name in self.reach.suggestors
            node_id = f"suggestor:{flow.name}"
            models = _models_of(spec, suggestor, declared)
            self.edges += [
                Edge(f"key:{k}", node_id, "reads", k in self.reach.keys) for k in flow.dependencies
            ]
            self.edges += [Edge(node_id, f"key:{k}", "writes", live) for k in flow.targets]
            self.edges += [
                Edge(f"key:{k}", node_id, "informs", live and k in self.reach.keys)
                for k in spec.side_reads()
                if k not in flow.dependencies
            ]
            called = _called(spec, suggestor, models)
            self.edges += [Edge(node_id, f"model:{m}", "calls", live) for m in called]
            self.edges += [
                Edge(node_id, f"model:{m}", "summarizes", live)
                for _, m in spec.side_calls()
                if m in models
            ]
            for _, pack in spec.pack_references():
                if pack in self.packs:
                    self.edges.append(Edge(f"pack:{pack}", node_id, "provides", live))
            yield Node(
                node_id,
                "suggestor",
                flow.name,
                spec.kind,
                live,
                _suggestor_details(spec, suggestor, flow, models, live),
                source=self.sources.of(("suggestors", index)),
                parts=spec.parts(),
            )

    def _used_keys(self) -> list[str]:
        used = set(self.seed_counts)
        for flow in self.flows:
            used.update(flow.dependencies, flow.targets)
        used.update(k for spec in self.specs for k in spec.side_reads())
        return [k for k in self.compiled.declared_keys if k in used or k in self.key_specs]

    def _keys(self) -> Iterator[Node]:
        schemas = self.compiled.settings.key_schemas
        for key in self._used_keys():
            live = key in self.reach.keys
            writers = self._by_key("writes", f"key:{key}")
            readers = self._by_key("reads", f"key:{key}")
            details: list[tuple[str, str]] = []
            declared = self.key_specs.get(key)
            if declared is not None and declared.description:
                details.append(("description", declared.description))
            if key in self.seed_counts:
                count = self.seed_counts[key]
                details.append(("seeded", f"{count} fact{'s' if count != 1 else ''}"))
            details += [("written by", _joined(writers)), ("read by", _joined(readers))]
            informed = self._by_key("informs", f"key:{key}")
            if informed:
                details.append(("informs", _joined(informed)))
            checked = [i.name for i in self.manifest.invariants if key in self._checks(i.check)]
            if checked:
                details.append(("checked by", _joined(checked)))
            if not live:
                details.append(("unreachable", "no seed and no suggestor that can fire writes it"))
            schema = schemas.get(key)
            yield Node(
                f"key:{key}",
                "key",
                key,
                "builtin" if key in BUILTIN_KEYS else "declared",
                live,
                tuple(details),
                schema=None if schema is None else json.dumps(schema, indent=2, ensure_ascii=False),
                source=self._key_source(key),
            )

    def _key_source(self, key: str) -> Source | None:
        if key in self.key_specs:
            return self.sources.of(self.key_specs[key].path)
        for index, seed in enumerate(self.document.data.get("seeds") or ()):
            if str(seed.get("key", "seeds")) == key:
                return self.sources.of(("seeds", index))
        return None

    def _index(self) -> dict[tuple[str, str], list[str]]:
        """(relation, node id) -> the names at the other end of its edges, in edge order."""
        if self._ends is None:
            self._ends = {}
            for edge in self.edges:
                for here, there in ((edge.source, edge.target), (edge.target, edge.source)):
                    self._ends.setdefault((edge.relation, here), []).append(there)
        return self._ends

    def _by_key(self, relation: str, node_id: str) -> list[str]:
        names = self._index().get((relation, node_id), [])
        return [name.partition(":")[2] for name in dict.fromkeys(names)]

    def _models(self) -> Iterator[Node]:
        for name, declaration in self.compiled.settings.models.items():
            users = self._by_key("calls", f"model:{name}")
            spec = declaration.spec
            details = [("adapter", spec.adapter), *spec.details, ("called by", _joined(users))]
            yield Node(
                f"model:{name}",
                "model",
                name,
                spec.adapter,
                any(u in self.reach.suggestors for u in users),
                tuple(details),
                source=self.sources.of(("models", name)),
            )

    def _checks(self, check: str) -> tuple[str, ...]:
        return keys_read(check, self.compiled.declared_keys)

    def _locked(self) -> Mapping[str, Any]:
        """Pack name -> its pin in the pipeline's lock (empty without a lock)."""
        from converge_dsl.errors import ConvergeError
        from converge_dsl.packs import read_lock

        settings = self.compiled.settings
        with contextlib.suppress(ConvergeError, OSError):
            lock = read_lock(settings.base_dir / Path(settings.file).name)
            return {} if lock is None else dict(lock.packs)
        return {}

    def _packs(self) -> Iterator[Node]:
        locked = self._locked() if self.manifest.packs else {}
        for pack in self.manifest.packs:
            users = self._by_key("provides", f"pack:{pack.name}")
            pin = locked.get(pack.name)
            version: tuple[tuple[str, str], ...] = (("version", pack.specifier),)
            if pin is not None:
                version = (
                    ("version", str(pin.version)),
                    ("requires", pack.specifier),
                    ("locked", f"{pin.repository}, sha256 {str(pin.sha256)[:16]}"),
                )
            yield Node(
                f"pack:{pack.name}",
                "pack",
                pack.name,
                "pack",
                any(u in self.reach.suggestors for u in users),
                (*version, ("provides", _joined(users))),
                source=self.sources.of(pack.path),
            )

    def _invariants(self) -> Iterator[GraphInvariant]:
        for spec, invariant in zip(self.manifest.invariants, self.compiled.invariants, strict=True):
            yield GraphInvariant(
                name=invariant.name,
                klass=str(invariant.invariant_class),
                critical=bool(invariant.critical),
                check=spec.check,
                message=spec.message,
                source=self.sources.of(spec.path),
                keys=self._checks(spec.check),
            )


def graph_of(compiled: CompiledPipeline) -> PipelineGraph:
    """The graph of a compiled pipeline, with static reachability marked (`_reach`)."""
    return _Builder(compiled).build()
