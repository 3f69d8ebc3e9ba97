"""Suggestor kinds as objects: `SuggestorKind`, its typed `SuggestorSpec`, the `KindRegistry`.

A kind carries everything about it (docs/architecture.md §16): its JSON-Schema
branch, a parser from the loaded mapping to a typed, immutable spec (name,
dependencies, targets, the keys, models and packs it names, its template
sites), its own checks, its compile builder, how the graph draws it and what
telemetry calls it. Every layer reads specs through the registry it is handed;
none branches on a kind's name. A builder is named by reference
(`"module:function"`) so that a kind defined here never imports the compiler:
the compiler resolves it (`SuggestorKind.builder()`).

`KindRegistry` maps kind names to kinds; an entry may be a reference
(`"module:ATTRIBUTE"`) imported the first time a pipeline names it, so a
rules-only validate imports no agent or pack code. A name the registry does
not hold is looked up once among the installed distributions' entry points of
the group `converge_dsl.kinds` (`importlib.metadata` is imported only then).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Self

from converge_dsl._json_types import JsonObject
from converge_dsl._record import Record
from converge_dsl.diagnostics import Diagnostic, JsonPath
from converge_dsl.sandbox import CONTEXT_NAMES

# A kind's check is a `frontend.Check` (`PipelineFacts -> Iterator[Diagnostic]`); the
# facts read the kinds, so the facts' class is not named here (no import circle).
KindCheck = Callable[[Any], Iterator[Diagnostic]]

ENTRY_POINT_GROUP = "converge_dsl.kinds"
AUTO = "auto"  # `dependencies: auto`: what its templates read (docs/reference.md)

# Extra names per place on top of `CONTEXT_NAMES`, which every template sees
# (docs/architecture.md §3).
ITEM_NAMES = CONTEXT_NAMES | {"item", "index"}


class TemplateSite(Record):
    """One template or expression in the pipeline and the names it may read."""

    _fields = ("path", "text", "expression", "names")
    __slots__ = _fields

    def __init__(self, path: JsonPath, text: str, expression: bool, names: frozenset[str]) -> None:
        self.path = path
        self.text = text
        self.expression = expression
        self.names = names


class DataSite(Record):
    """A value a suggestor proposes as a fact's data, known before the run.

    `value` is the JSON value (`expression` False) or the text of an expression
    whose value is data (`expression` True); `path` is the item holding `data`.
    """

    _fields = ("key", "path", "value", "expression")
    __slots__ = _fields

    def __init__(self, key: str, path: JsonPath, value: Any, expression: bool) -> None:
        self.key = key
        self.path = path
        self.value = value
        self.expression = expression


class ProposalSpec(Record):
    """One fact a seed or rule proposes, as written (a `facts` or `emit` entry).

    `id` is a template; `content` a template (or, legacy, a JSON object); `confidence`
    a number or a template; `data` a JSON value (seeds) or an expression's text
    (rules), None when absent (`has_data` tells a seed's `data: null` from none).
    `label` names the entry in errors (`emit[0]`).
    """

    _fields = ("path", "key", "id", "content", "confidence", "data", "label", "has_data")
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (the fields, in order)
        self,
        path: JsonPath,
        key: str,
        id: str,
        content: object,
        confidence: object,
        data: object,
        label: str,
        has_data: bool | None = None,
    ) -> None:
        self.path = path
        self.key = key
        self.id = id
        self.content = content
        self.confidence = confidence
        self.data = data
        self.label = label
        self.has_data = data is not None if has_data is None else has_data

    @classmethod
    def each(
        cls,
        path: JsonPath,
        items: Sequence[Mapping[str, Any]],
        default_key: str | None,
        missing: list[JsonPath] | None = None,
    ) -> tuple[ProposalSpec, ...]:
        """The entries of the list at `path` (`default_key` where one names no key).

        An entry without `id` or `content` (a pack's template, which no schema
        checked) gets `""` and its path is added to `missing`.
        """
        return tuple(
            cls(
                (*path, index),
                str(item.get("key", default_key)),
                str(required(item, "id", (*path, index), missing, "")),
                required(item, "content", (*path, index), missing, ""),
                item.get("confidence", 1.0),
                item.get("data"),
                f"{path[-1]}[{index}]",
                "data" in item,
            )
            for index, item in enumerate(items)
        )


def required(
    mapping: Mapping[str, Any],
    field: str,
    path: JsonPath,
    missing: list[JsonPath] | None,
    default: Any,
) -> Any:
    """`mapping[field]`, a field the schema requires; when absent (only in a pack's template,
    which no schema checked), `default`, and `(*path, field)` is added to `missing`."""
    if field in mapping:
        return mapping[field]
    if missing is not None:
        missing.append((*path, field))
    return default


# The fields every kind's spec shares, in `SuggestorSpec._fields` order (`SuggestorSpec.head`).
SpecHead = tuple[
    str, str, JsonPath, JsonObject, tuple[str, ...], tuple[str, ...], str | None, str | None
]


class SuggestorSpec(Record):
    """What every suggestor declares, typed; a kind's spec adds its own fields.

    `path` locates it in the document (its span is `source_map.span(path)`; the
    parts a kind's spec adds keep their own paths). `raw` is the mapping it was
    read from: the built-in kinds read everything they need from it once, in
    their parser, and nothing reads it afterwards; a kind of another
    distribution may keep reading it. `dependencies` are the keys it reads,
    `targets` the keys it writes, `description` its `description` (None when
    not written). `missing` lists the paths of fields the schema requires that a
    pack's template (which no schema checked) leaves out: its builder refuses it
    (CD606).
    """

    _fields: ClassVar[tuple[str, ...]] = (
        "kind",
        "name",
        "path",
        "raw",
        "dependencies",
        "targets",
        "when",
        "description",
        "missing",
    )
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (the fields, in order)
        self,
        kind: str,
        name: str,
        path: JsonPath,
        raw: JsonObject,
        dependencies: tuple[str, ...],
        targets: tuple[str, ...],
        when: str | None,
        description: str | None = None,
        missing: tuple[JsonPath, ...] = (),
    ) -> None:
        self.kind = kind
        self.name = name
        self.path = path
        self.raw = raw
        self.dependencies = dependencies
        self.targets = targets
        self.when = when
        self.description = description
        self.missing = missing

    @staticmethod
    def head(
        kind: str, path: JsonPath, raw: Mapping[str, Any], targets: tuple[str, ...]
    ) -> SpecHead:
        """The fields every kind shares, read from `raw` (a kind's spec with fields of its
        own is made as `KindSpec(*SuggestorSpec.head(...), own=...)`). `dependencies:
        auto` reads as none here: the kind's `parse` infers them from the whole spec."""
        when, description = raw.get("when"), raw.get("description")
        written = raw.get("dependencies")
        return (
            kind,
            str(raw.get("name", "")),
            path,
            raw,
            tuple(str(k) for k in written) if isinstance(written, (list, tuple)) else (),
            targets,
            when if isinstance(when, str) else None,
            description if isinstance(description, str) else None,
        )

    @property
    def auto_dependencies(self) -> bool:
        """Its dependencies are inferred from its templates (`dependencies: auto`)."""
        return self.raw.get("dependencies") == AUTO

    def triggers(self) -> tuple[str, ...]:
        """The keys whose change makes it a candidate again (none: a candidate every cycle)."""
        return self.dependencies

    def proposal_specs(self) -> tuple[ProposalSpec, ...]:
        """The facts it proposes as written (id, content, data), when the kind knows them
        before the run (a seed's facts, a rule's emits); () when a model decides."""
        return ()

    @classmethod
    def common(
        cls, kind: str, path: JsonPath, raw: Mapping[str, Any], targets: tuple[str, ...]
    ) -> Self:
        """The spec of `raw` with the fields every kind shares read (for a kind whose spec
        adds no field: its own are then properties over `raw`)."""
        return cls(*cls.head(kind, path, raw, targets))

    def templates(self, extra: frozenset[str] = frozenset()) -> tuple[TemplateSite, ...]:
        """Every template and expression with the names in scope there (plus `extra`)."""
        return self.sites(extra, [(("when",), self.when, CONTEXT_NAMES, True)])

    def sites(
        self,
        extra: frozenset[str],
        found: Sequence[tuple[JsonPath, object, frozenset[str], bool]],
    ) -> tuple[TemplateSite, ...]:
        """`TemplateSite`s of the (relative path, value, names, expression) that are text."""
        return tuple(
            TemplateSite((*self.path, *where), value, expression, names | extra)
            for where, value, names, expression in found
            if isinstance(value, str)
        )

    def key_references(self) -> tuple[tuple[JsonPath, str], ...]:
        """Every place in the suggestor that names a context key, with the key.

        Here: its dependencies and, for a kind of another distribution, a `target`
        written in its mapping; the built-in kinds answer from their typed fields.
        """
        return (*self.dependency_references(), *self.references("target", self.raw.get("target")))

    def dependency_references(self) -> tuple[tuple[JsonPath, str], ...]:
        """Each key of `dependencies`, at its place (inferred dependencies name none: their
        reads are checked where they are written)."""
        written = () if self.auto_dependencies else self.dependencies
        return tuple(((*self.path, "dependencies", i), k) for i, k in enumerate(written))

    def references(self, field: str, name: object) -> tuple[tuple[JsonPath, str], ...]:
        """`((path of field, name),)` when `name` (written at `field`) is text, else `()`."""
        return (((*self.path, field), name),) if isinstance(name, str) else ()

    def model_references(self) -> tuple[tuple[JsonPath, str], ...]:
        """Every place that names a model declared under `models` (here: a `model` written
        in the mapping of a kind of another distribution)."""
        return self.references("model", self.raw.get("model"))

    def models_used(self) -> frozenset[str]:
        """The models it runs on, named or implied."""
        return frozenset(name for _, name in self.model_references())

    def pack_references(self) -> tuple[tuple[JsonPath, str], ...]:
        """Every place that names a pack declared under `packs`, with the pack."""
        return ()

    def tool_references(self) -> tuple[tuple[JsonPath, str, str], ...]:
        """Every place that names a tool of a server declared under `tools`: (path, server,
        tool), tool `*` for every tool the server allows."""
        return ()

    def data_sites(self) -> tuple[DataSite, ...]:
        """Data it proposes that is known before the run."""
        return ()

    def content_items(self) -> tuple[tuple[JsonPath, object], ...]:
        """(path, `content` as written) of each item whose content it proposes as given (an
        object given as content, the legacy form, is data)."""
        return ()

    def schemas(self) -> tuple[tuple[str, JsonPath, Any], ...]:
        """(label, path, schema) of each JSON Schema it applies to data (not key schemas)."""
        return ()

    def items(self) -> tuple[JsonPath, Any] | None:
        """When its output templates see a JSON `item`: (their path, the item's own schema or
        None, meaning the target key's)."""
        return None

    def details(self) -> tuple[tuple[str, str], ...]:
        """What a drawing says of it beyond reads, writes and models (`uses`...)."""
        return ()

    def side_reads(self) -> tuple[str, ...]:
        """Keys it reads besides `dependencies`, which never make it a candidate (an
        agent's contributors inject their facts): a drawing's `informs` edges."""
        return ()

    def side_calls(self) -> tuple[tuple[str, str], ...]:
        """(part, model) of each call it makes besides its own model's (an agent's
        `summarizer`): a drawing's `summarizes` edges."""
        return ()

    def parts(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """Labelled parts a drawing marks on its node (an agent's `tools`, `contributors`)."""
        return ()


Parser = Callable[[JsonPath, Mapping[str, Any]], SuggestorSpec]


def _inferring(parse: Parser) -> Parser:
    """`parse`, then a spec written with `dependencies: auto` given the keys its templates
    read, less its targets (`_dataflow.inferred_dependencies`): one place for every kind."""

    def parse_spec(path: JsonPath, raw: Mapping[str, Any]) -> SuggestorSpec:
        spec = parse(path, raw)
        if not spec.auto_dependencies:
            return spec
        from converge_dsl.frontend._dataflow import inferred_dependencies

        templates = ((site.text, site.expression) for site in spec.templates())
        return spec._replace(dependencies=inferred_dependencies(templates, spec.targets))

    return parse_spec


class GraphStyle(Record):
    """How the graph draws a kind: fill, stroke and text colours, a shape, a legend label.

    `shape` is `box` or `hexagon`.
    """

    _fields = ("fill", "stroke", "text", "shape", "label")
    __slots__ = _fields

    def __init__(self, fill: str, stroke: str, text: str, shape: str, label: str) -> None:
        self.fill = fill
        self.stroke = stroke
        self.text = text
        self.shape = shape
        self.label = label


class SuggestorKind(Record):
    """One suggestor kind, everything about it in one object (see the module docstring).

    - `schema`: the `$defs` it adds to the pipeline schema; its branch is
      `$defs[branch]`. Built-in kinds' defs are in the shipped schema (`None`).
    - `parse(path, mapping) -> SuggestorSpec` (the mapping passed the schema).
    - `checks`: semantic checks, run once for a pipeline that uses the kind: callables
      or `"module:function"` references (`check_functions()` imports them on first use).
    - `build`: the compile builder, a callable or a `"module:function"` reference.
    - `graph`: its `GraphStyle`; `telemetry`: the name spans and reports give
      it, `operation` the OpenTelemetry GenAI operation of its execution (or None).
    """

    _fields = (
        "name",
        "branch",
        "schema",
        "parse",
        "checks",
        "build",
        "graph",
        "telemetry",
        "operation",
    )
    __slots__ = _fields

    def __init__(  # noqa: PLR0917 (the fields, in order)
        self,
        name: str,
        branch: str,
        schema: Mapping[str, Any] | None,
        parse: Parser,
        checks: tuple[KindCheck | str, ...],
        build: Callable[..., Any] | str,
        graph: GraphStyle,
        telemetry: str | None = None,
        operation: str | None = None,
    ) -> None:
        self.name = name
        self.branch = branch
        self.schema = schema
        self.parse = _inferring(parse)
        self.checks = checks
        self.build = build
        self.graph = graph
        self.telemetry = telemetry or name
        self.operation = operation

    def check_functions(self) -> tuple[KindCheck, ...]:
        """Its checks, a `"module:function"` reference imported on first use."""
        return tuple(c if callable(c) else _resolve(c) for c in self.checks)

    def builder(self) -> Callable[..., Any]:
        """The compile builder `(mapping, path, CompileContext) -> Suggestor`."""
        build = self.build
        return build if callable(build) else _resolve(build)


def _resolve(reference: str) -> Any:
    """The attribute a `"module:attribute"` reference names (imported on first use)."""
    module, _, attribute = reference.partition(":")
    __import__(module)  # the path of an import statement: -X importtime lists it
    return getattr(sys.modules[module], attribute)


class KindRegistry:
    """Kind name -> `SuggestorKind`, in registration order; immutable.

    Entries given as references are imported when first asked for (then
    remembered); `get` of a name it does not hold looks among the entry points
    of the group `converge_dsl.kinds` once per process.
    """

    __slots__ = ("_entries", "_loaded")

    def __init__(self, kinds: Mapping[str, SuggestorKind | str]) -> None:
        self._entries: dict[str, SuggestorKind | str] = dict(kinds)
        self._loaded: dict[str, SuggestorKind] = {}

    def with_kinds(self, kinds: Mapping[str, SuggestorKind | str]) -> KindRegistry:
        """A registry holding these kinds and then `kinds` (a name given again is replaced)."""
        return KindRegistry({**self._entries, **kinds})

    @property
    def names(self) -> tuple[str, ...]:
        """The kinds registered here, in order (not those of entry points)."""
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str) -> SuggestorKind | None:
        """The kind called `name`: registered here, else from an entry point, else None."""
        kind = self._loaded.get(name)
        if kind is not None:
            return kind
        entry = self._entries.get(name)
        if entry is None:
            kind = installed_kinds().get(name)
        else:
            kind = _resolve(entry) if isinstance(entry, str) else entry
        if kind is not None:
            self._loaded[name] = kind
        return kind

    def kind(self, name: str) -> SuggestorKind:
        """The kind called `name`; `KeyError` when there is none (validate reports it first)."""
        kind = self.get(name)
        if kind is None:
            raise KeyError(name)
        return kind

    def all(self) -> tuple[SuggestorKind, ...]:
        """Every kind: those registered here, then those of entry points, in name order."""
        own = [self.kind(name) for name in self._entries]
        others = installed_kinds()
        return (*own, *(others[name] for name in sorted(others) if name not in self._entries))

    def spec(self, path: JsonPath, raw: Mapping[str, Any]) -> SuggestorSpec:
        """The typed spec of one suggestor mapping (which passed the schema)."""
        return self.kind(str(raw.get("kind"))).parse(path, raw)

    def specs(
        self, data: Mapping[str, Any], earlier: Iterable[SuggestorSpec] = ()
    ) -> Iterator[SuggestorSpec]:
        """The typed specs of a pipeline's `suggestors`, in registration order.

        `earlier`: specs this registry made of an earlier text of the pipeline (an
        editor's). One whose mapping is the very object at the same place is taken as
        it is: a spec is its kind's parse of its place and mapping, and the loader
        (`load_text`'s `previous`) hands on the objects of the entries that did not
        change.
        """
        made = {id(spec.raw): spec for spec in earlier}
        for index, raw in enumerate(data.get("suggestors") or ()):
            path = ("suggestors", index)
            spec = made.get(id(raw))
            if spec is None or spec.raw is not raw or spec.path != path:
                spec = self.spec(path, raw)
            yield spec


_INSTALLED: dict[str, SuggestorKind] | None = None
_BROKEN: dict[str, str] = {}


def installed_kinds() -> Mapping[str, SuggestorKind]:
    """The kinds of the installed distributions (entry points `converge_dsl.kinds`), once.

    An entry point that fails to import, or names no `SuggestorKind`, is left
    out and remembered with the reason (`broken_kinds`), so validate can say why.
    """
    global _INSTALLED  # noqa: PLW0603 (read once per process: the installed set is fixed)
    if _INSTALLED is None:
        from importlib.metadata import entry_points

        found: dict[str, SuggestorKind] = {}
        for point in entry_points(group=ENTRY_POINT_GROUP):
            where = f"entry point {point.name} = {point.value}"
            try:
                kind = point.load()
            except Exception as exc:  # a plug-in's failure is reported (CD240), not raised
                _BROKEN[point.name] = f"{where} fails to load ({type(exc).__name__}: {exc})"
                continue
            if isinstance(kind, SuggestorKind):
                found[kind.name] = kind
            else:
                _BROKEN[point.name] = f"{where} is not a SuggestorKind"
        _INSTALLED = found
    return _INSTALLED


def broken_kinds() -> Mapping[str, str]:
    """Entry-point name -> why it gave no kind (read with `installed_kinds`)."""
    installed_kinds()
    return _BROKEN


def forget_installed_kinds() -> None:
    """Read the entry points again on next use (tests that install a distribution)."""
    global _INSTALLED  # noqa: PLW0603
    _INSTALLED = None
    _BROKEN.clear()
