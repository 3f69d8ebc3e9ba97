"""`build_manifest(document) -> PipelineManifest`: the typed view of a schema-checked pipeline.

Everything a pipeline declares besides its suggestors, as frozen records: the
header, the declared keys with their schemas, the inputs, the
models (one record per adapter, with the account roster), the tool servers
(`tools:`, one record per MCP server), the budget, the
promotion policy, the packs' specifiers, the repositories, the invariants and
the seeds (`ProposalSpec`s, as a seed suggestor's facts are; docs/architecture.md
§4). The records trust the shapes the JSON Schema guarantees and check nothing
themselves; each keeps its JSON path and finds its
`SourceSpan` on demand, so later errors stay located. Defaults are not filled
in: a field not written is `None` (or empty), and the engine's own classes hold
the defaults. Suggestors stay the raw mappings they are: their kinds parse them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from converge_dsl._json_types import JsonObject, JsonSchema, JsonValue
from converge_dsl._record import Record
from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend._kinds import ProposalSpec
from converge_dsl.frontend._located import Located, Number
from converge_dsl.frontend._model_specs import ModelSpec, model_spec
from converge_dsl.frontend._tool_specs import ToolServerSpec, tool_server_spec
from converge_dsl.frontend.document import LoadedDocument, SourceMap


class KeySpec(Located):
    """One `keys[]` entry: a declared context key and the JSON Schema of its facts' data."""

    _fields = ("name", "description", "schema", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self,
        name: str,
        description: str | None,
        schema: JsonSchema | None,
        path: JsonPath,
        source_map: SourceMap | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.schema = schema
        self.path = path
        self.source_map = source_map


class InputSpec(Located):
    """One `inputs.<name>` entry; `has_default` tells a `default: null` from none."""

    _fields = ("name", "description", "required", "has_default", "default", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self,
        *,
        name: str,
        description: str | None,
        required: bool,
        has_default: bool,
        default: JsonValue,
        path: JsonPath,
        source_map: SourceMap | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.required = required
        self.has_default = has_default
        self.default = default
        self.path = path
        self.source_map = source_map


class BudgetSpec(Located):
    """`budget:`; a limit not written is None (the engine's `Budget` holds the defaults)."""

    _fields = (
        "max_cycles",
        "max_facts",
        "max_model_calls",
        "max_tokens",
        "max_wall_s",
        "max_concurrency",
        "max_tool_calls",
        "path",
        "source_map",
    )
    __slots__ = _fields

    def __init__(
        self,
        *,
        max_cycles: int | None = None,
        max_facts: int | None = None,
        max_model_calls: int | None = None,
        max_tokens: int | None = None,
        max_wall_s: Number | None = None,
        max_concurrency: int | None = None,
        max_tool_calls: int | None = None,
        path: JsonPath = ("budget",),
        source_map: SourceMap | None = None,
    ) -> None:
        self.max_cycles = max_cycles
        self.max_facts = max_facts
        self.max_model_calls = max_model_calls
        self.max_tokens = max_tokens
        self.max_wall_s = max_wall_s
        self.max_concurrency = max_concurrency
        self.max_tool_calls = max_tool_calls
        self.path = path
        self.source_map = source_map


class PromotionSpec(Located):
    """`promotion:`; a setting not written is None (the engine's policy holds the defaults)."""

    _fields = (
        "min_confidence",
        "max_content_length",
        "require_provenance",
        "forbidden_terms",
        "gated_keys",
        "confidence_threshold",
        "path",
        "source_map",
    )
    __slots__ = _fields

    def __init__(
        self,
        *,
        min_confidence: Number | None = None,
        max_content_length: int | None = None,
        require_provenance: bool | None = None,
        forbidden_terms: tuple[str, ...] | None = None,
        gated_keys: tuple[str, ...] | None = None,
        confidence_threshold: Number | None = None,
        path: JsonPath = ("promotion",),
        source_map: SourceMap | None = None,
    ) -> None:
        self.min_confidence = min_confidence
        self.max_content_length = max_content_length
        self.require_provenance = require_provenance
        self.forbidden_terms = forbidden_terms
        self.gated_keys = gated_keys
        self.confidence_threshold = confidence_threshold
        self.path = path
        self.source_map = source_map


class PackRequirement(Located):
    """One `packs.<name>: SPECIFIER` entry (the PEP 440 text as written)."""

    _fields = ("name", "specifier", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self, name: str, specifier: str, path: JsonPath, source_map: SourceMap | None = None
    ) -> None:
        self.name = name
        self.specifier = specifier
        self.path = path
        self.source_map = source_map


class RepositorySpec(Located):
    """One `repositories[]` entry: `builtin`, a local folder (`folder`: its `path`) or a URL.

    `written` is the entry as written: the lock file records and compares it.
    """

    _fields = ("folder", "url", "trusted_keys", "redirect_hosts", "written", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self,
        *,
        folder: str | None,
        url: str | None,
        trusted_keys: tuple[str, ...],
        redirect_hosts: tuple[str, ...],
        written: object,
        path: JsonPath,
        source_map: SourceMap | None = None,
    ) -> None:
        self.folder = folder
        self.url = url
        self.trusted_keys = trusted_keys
        self.redirect_hosts = redirect_hosts
        self.written = written
        self.path = path
        self.source_map = source_map

    @property
    def builtin(self) -> bool:
        return self.folder is None and self.url is None


class InvariantSpec(Located):
    """One `invariants[]` entry; `critical` is None when not written (critical by default)."""

    _fields = ("name", "klass", "check", "critical", "message", "path", "source_map")
    __slots__ = _fields

    def __init__(
        self,
        *,
        name: str,
        klass: str,
        check: str,
        critical: bool | None,
        message: str | None,
        path: JsonPath,
        source_map: SourceMap | None = None,
    ) -> None:
        self.name = name
        self.klass = klass
        self.check = check
        self.critical = critical
        self.message = message
        self.path = path
        self.source_map = source_map


class PipelineManifest(Record):
    """A schema-checked pipeline as typed records (see the module docstring).

    `models`, `tools` and `inputs` are read-only mappings in document order; `trust` maps
    a pack's name to the names of its tool servers the pipeline lets run; `seeds` the
    `seeds:` entries, typed; `suggestors` the document's own list; `document` is the document the
    manifest was built from (the compiler reads its suggestors and source map).
    """

    _fields = (
        "name",
        "api_version",
        "description",
        "keys",
        "inputs",
        "models",
        "tools",
        "trust",
        "budget",
        "promotion",
        "on_error",
        "packs",
        "repositories",
        "invariants",
        "seeds",
        "suggestors",
        "document",
    )
    __slots__ = _fields

    def __init__(
        self,
        *,
        name: str,
        api_version: str,
        description: str | None,
        keys: tuple[KeySpec, ...],
        inputs: Mapping[str, InputSpec],
        models: Mapping[str, ModelSpec],
        budget: BudgetSpec,
        tools: Mapping[str, ToolServerSpec] = MappingProxyType({}),
        trust: Mapping[str, tuple[str, ...]] = MappingProxyType({}),
        promotion: PromotionSpec,
        on_error: str | None,
        packs: tuple[PackRequirement, ...],
        repositories: tuple[RepositorySpec, ...],
        invariants: tuple[InvariantSpec, ...],
        seeds: tuple[ProposalSpec, ...],
        suggestors: Sequence[JsonObject],
        document: LoadedDocument,
    ) -> None:
        self.name = name
        self.api_version = api_version
        self.description = description
        self.keys = keys
        self.inputs = inputs
        self.models = models
        self.tools = tools
        self.trust = trust
        self.budget = budget
        self.promotion = promotion
        self.on_error = on_error
        self.packs = packs
        self.repositories = repositories
        self.invariants = invariants
        self.seeds = seeds
        self.suggestors = suggestors
        self.document = document

    @property
    def file(self) -> str:
        return self.document.file

    def key_schemas(self) -> dict[str, JsonSchema]:
        """Declared key -> its `schema` (only the keys that have one), in document order."""
        return {k.name: k.schema for k in self.keys if k.schema is not None}


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _strings(value: Iterable[object] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(v) for v in value)


def _repository(index: int, raw: object, source_map: SourceMap) -> RepositorySpec:
    entry: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return RepositorySpec(
        folder=_str(entry.get("path")),
        url=_str(entry.get("url")),
        trusted_keys=_strings(entry.get("trusted_keys")) or (),
        redirect_hosts=_strings(entry.get("redirect_hosts")) or (),
        written=raw,
        path=("repositories", index),
        source_map=source_map,
    )


def _invariant(index: int, raw: Mapping[str, Any], source_map: SourceMap) -> InvariantSpec:
    critical = raw.get("critical")
    return InvariantSpec(
        name=str(raw["name"]),
        klass=str(raw["class"]),
        check=str(raw["check"]),
        critical=None if critical is None else bool(critical),
        message=_str(raw.get("message")),
        path=("invariants", index),
        source_map=source_map,
    )


def _section(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    section: Mapping[str, Any] = data.get(name) or {}
    return section


def build_manifest(document: LoadedDocument) -> PipelineManifest:
    """The manifest of a document that passed the pipeline schema (see the module docstring)."""
    data: Mapping[str, Any] = document.data
    where = document.source_map
    keys = tuple(
        KeySpec(str(k["name"]), _str(k.get("description")), k.get("schema"), ("keys", i), where)
        for i, k in enumerate(data.get("keys") or ())
    )
    inputs = {
        str(n): InputSpec(
            name=str(n),
            description=_str((spec or {}).get("description")),
            required=bool((spec or {}).get("required", False)),
            has_default="default" in (spec or {}),
            default=(spec or {}).get("default"),
            path=("inputs", n),
            source_map=where,
        )
        for n, spec in _section(data, "inputs").items()
    }
    models = {
        str(n): model_spec(str(n), config, ("models", n), where)
        for n, config in _section(data, "models").items()
    }
    tools = {
        str(n): tool_server_spec(str(n), config, ("tools", n), where)
        for n, config in _section(data, "tools").items()
    }
    promotion = _section(data, "promotion")
    return PipelineManifest(
        name=str(data["name"]),
        api_version=str(data.get("apiVersion")),
        description=_str(data.get("description")),
        keys=keys,
        inputs=MappingProxyType(inputs),
        models=MappingProxyType(models),
        tools=MappingProxyType(tools),
        trust=MappingProxyType(
            {str(n): _strings(servers) or () for n, servers in _section(data, "trust").items()}
        ),
        budget=BudgetSpec(**_section(data, "budget"), source_map=where),
        promotion=PromotionSpec(
            **{
                **promotion,
                "forbidden_terms": _strings(promotion.get("forbidden_terms")),
                "gated_keys": _strings(promotion.get("gated_keys")),
            },
            source_map=where,
        ),
        on_error=_str(data.get("on_error")),
        packs=tuple(
            PackRequirement(str(n), str(s), ("packs", n), where)
            for n, s in _section(data, "packs").items()
        ),
        repositories=tuple(
            _repository(i, r, where) for i, r in enumerate(data.get("repositories") or ())
        ),
        invariants=tuple(
            _invariant(i, v, where) for i, v in enumerate(data.get("invariants") or ())
        ),
        seeds=ProposalSpec.each(("seeds",), data.get("seeds") or (), "seeds"),
        suggestors=data.get("suggestors") or (),
        document=document,
    )
