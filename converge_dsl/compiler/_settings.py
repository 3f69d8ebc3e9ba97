"""compile_settings(document) -> PipelineSettings: the cheap first step of compilation.

Everything the runtime needs before it can compile suggestors: the run's
budget (for the usage meter and the deadline), the promotion policy, the error
policy, the resolved inputs, the declared keys, the seed facts and the typed
model declarations (what the models factory is handed and which files each
model reads). The budget, policy and error policy are the engine's own objects:
their defaults live only in the engine's dataclasses. The key schemas
(`keys[].schema`, checked to be valid JSON Schemas) go into the promotion
policy, whose gate checks every fact's data against its key's schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from converge_dsl import codes
from converge_dsl._safe_schema import meta_error
from converge_dsl._schema_bounds import size_problems
from converge_dsl.diagnostics import Diagnostic, unknown_name_hint
from converge_dsl.engine import Budget, OnError, PromotionPolicy
from converge_dsl.engine.types import ProposedFact, Provenance
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.keys import BUILTIN_KEYS

from ._common import text_and_data

# The fields of a `models.<name>` entry that name a file the model reads.
_READ_FIELDS = ("script", "cassette")


@dataclass(frozen=True, slots=True)
class ModelDeclaration:
    """One `models.<name>` entry.

    `config` is the entry as written (handed to the models factory with
    `base_dir`); `files` maps each field naming a file the model reads
    (`script`, `cassette`) to that path, resolved against the pipeline folder.
    """

    name: str
    config: Mapping[str, Any]
    files: Mapping[str, Path]
    base_dir: Path


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    """A validated pipeline's settings: all but its suggestors and invariants. Immutable.

    `document` is the validated document the settings were read from; only the
    compiler reads its data.
    """

    name: str
    file: str
    base_dir: Path
    budget: Budget
    promotion: PromotionPolicy
    on_error: OnError
    inputs: Mapping[str, Any]
    declared_keys: tuple[str, ...]
    seeds: tuple[ProposedFact, ...]
    models: Mapping[str, ModelDeclaration]
    document: LoadedDocument
    key_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def source(self, suggestor: str) -> str:
        """The provenance source of a suggestor: `name@pipeline`."""
        return f"{suggestor}@{self.name}"


def resolve_inputs(declared: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """Declared inputs with defaults applied; raises `UsageError` for unknown or missing ones."""
    for name in given:
        if name not in declared:
            listed = f"declared inputs: {', '.join(sorted(declared)) or 'none'}"
            raise UsageError(
                f"unknown input {name!r}", hint=unknown_name_hint(name, declared, listed)
            )
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        spec_map = spec or {}
        if name in given:
            values[name] = given[name]
        elif "default" in spec_map:
            values[name] = spec_map["default"]
        elif spec_map.get("required", False):
            raise UsageError(f"input {name!r} is required", hint=f"pass --input {name}=VALUE")
    return values


def declare_models(document: LoadedDocument) -> Mapping[str, ModelDeclaration]:
    """The typed `models:` declarations of a validated document, in document order.

    Needs no inputs: a tool may check the files a run reads before resolving them.
    """
    base_dir = Path(document.file).parent
    declared: Mapping[str, Any] = document.data.get("models") or {}
    models: dict[str, ModelDeclaration] = {}
    for name, config in declared.items():
        entry: Mapping[str, Any] = config if isinstance(config, Mapping) else {}
        files = {
            field: base_dir / value
            for field in _READ_FIELDS
            if isinstance(value := entry.get(field), str)
        }
        models[str(name)] = ModelDeclaration(
            str(name), MappingProxyType(dict(entry)), MappingProxyType(files), base_dir
        )
    return MappingProxyType(models)


def key_schemas(document: LoadedDocument) -> Mapping[str, Mapping[str, Any]]:
    """The `keys[].schema` of a validated document by key name.

    Raises a located `PipelineInvalid` for a schema that is not a valid JSON
    Schema (draft 2020-12 unless its `$schema` says otherwise; CD605) or that
    is wider than the limits of `converge_dsl._schema_bounds` (CD130).
    """
    schemas: dict[str, Mapping[str, Any]] = {}
    for index, key in enumerate(document.data.get("keys") or ()):
        schema = key.get("schema")
        if schema is None:
            continue
        name = key["name"]
        problem = size_problems(schema)  # the size limits first: the meta check is linear
        if problem:
            where, message = problem[0]
            code, text = codes.SCHEMA_TOO_LARGE, f"the schema of key {name!r}: {message}"
        elif (error := meta_error(schema)) is not None:
            where, code = tuple(error.relative_path), codes.COMPILE_BAD_KEY_SCHEMA
            text = f"the schema of key {name!r} is not a valid JSON Schema: {error.message}"
        else:
            schemas[str(name)] = schema
            continue
        path = ("keys", index, "schema", *where)
        span = document.source_map.span(path)
        raise PipelineInvalid([Diagnostic.at(code, text, span, path=path)])
    return MappingProxyType(schemas)


def _seed(spec: Mapping[str, Any], source: Provenance) -> ProposedFact:
    content, data = text_and_data(spec["content"], spec.get("data"))
    return ProposedFact(
        key=str(spec.get("key", "seeds")),
        id=str(spec["id"]),
        content=content,
        confidence=float(spec.get("confidence", 1.0)),
        provenance=source,
        data=data,
    )


def compile_settings(document: LoadedDocument, *, inputs: Mapping[str, Any]) -> PipelineSettings:
    """The settings of a validated document.

    Raises `UsageError` for unknown or missing inputs, a located `PipelineInvalid`
    for a key schema that is not a valid JSON Schema.
    """
    data = document.data
    name = str(data["name"])
    declared = tuple(
        dict.fromkeys([*BUILTIN_KEYS, *(str(k["name"]) for k in data.get("keys") or ())])
    )
    resolved = resolve_inputs(data.get("inputs") or {}, inputs)
    source = Provenance(f"seeds@{name}")  # one object shared by every seed
    seeds = tuple(_seed(s, source) for s in data.get("seeds") or ())
    schemas = key_schemas(document)
    on_error: OnError = "diagnose" if data.get("on_error") == "diagnose" else "stop"
    return PipelineSettings(
        name=name,
        file=document.file,
        base_dir=Path(document.file).parent,
        budget=Budget(**(data.get("budget") or {})),
        promotion=PromotionPolicy(**(data.get("promotion") or {}), key_schemas=schemas),
        on_error=on_error,
        inputs=MappingProxyType(resolved),
        declared_keys=declared,
        seeds=seeds,
        models=declare_models(document),
        document=document,
        key_schemas=schemas,
    )
