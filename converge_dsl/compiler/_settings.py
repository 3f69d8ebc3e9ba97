"""compile_settings(manifest) -> PipelineSettings: the cheap first step of compilation.

It reads the front end's typed manifest (docs/architecture.md §6). Everything
the runtime needs before it can compile suggestors: the run's budget (for the
usage meter and the deadline), the promotion policy, the error
policy, the resolved inputs, the declared keys, the seed facts and the typed
model declarations (what the models factory is handed and which files each
model reads). The budget, policy and error policy are the engine's own objects:
their defaults live only in the engine's dataclasses. The key schemas
(`keys[].schema`, checked to be valid JSON Schemas) go into the promotion
policy, whose gate checks every fact's data against its key's schema.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from converge_dsl import codes
from converge_dsl._escapes import written
from converge_dsl._json_types import JsonObject, JsonSchema, JsonValue
from converge_dsl.diagnostics import Diagnostic, unknown_name_hint
from converge_dsl.engine import Budget, OnError, PromotionPolicy
from converge_dsl.engine.types import ProposedFact, Provenance, text_and_data
from converge_dsl.errors import PipelineInvalid, UsageError
from converge_dsl.frontend import (
    BudgetSpec,
    InputSpec,
    LoadedDocument,
    ModelSpec,
    PipelineManifest,
    PromotionSpec,
    ProposalSpec,
    build_manifest,
)
from converge_dsl.keys import BUILTIN_KEYS
from converge_dsl.sandbox import meta_error, size_problems

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ModelDeclaration:
    """One `models.<name>` entry.

    `spec` is the entry's typed record (handed to the models factory with
    `base_dir`); `files` maps each field naming a file the model reads
    (`script`, `cassette`) to that path, resolved against the pipeline folder.
    """

    name: str
    spec: ModelSpec
    files: Mapping[str, Path]
    base_dir: Path


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    """A validated pipeline's settings: all but its suggestors and invariants. Immutable.

    `manifest` is what the settings were read from; `document` is its document,
    whose suggestors only the compiler reads.
    """

    name: str
    file: str
    base_dir: Path
    budget: Budget
    promotion: PromotionPolicy
    on_error: OnError
    inputs: JsonObject
    declared_keys: tuple[str, ...]
    seeds: tuple[ProposedFact, ...]
    models: Mapping[str, ModelDeclaration]
    document: LoadedDocument
    manifest: PipelineManifest
    key_schemas: Mapping[str, JsonSchema] = field(default_factory=dict)

    def source(self, suggestor: str) -> str:
        """The provenance source of a suggestor: `name@pipeline`."""
        return f"{suggestor}@{self.name}"


def resolve_inputs(declared: Mapping[str, InputSpec], given: JsonObject) -> dict[str, JsonValue]:
    """Declared inputs with defaults applied; raises `UsageError` for unknown or missing ones."""
    for name in given:
        if name not in declared:
            raise unknown_input(name, declared)
    values: dict[str, JsonValue] = {}
    for name, spec in declared.items():
        if name in given:
            values[name] = given[name]
        elif spec.has_default:
            values[name] = spec.default
        elif spec.required:
            raise UsageError(
                f"input {name!r} is required",
                hint=f"pass --input {name}=VALUE",
                code=codes.INPUT_REFUSED,
            )
    return values


def unknown_input(name: str, declared: Collection[str]) -> UsageError:
    """The refusal of an input `name` the pipeline does not declare (its `declared`
    inputs), "did you mean" in its hint: a run's (`resolve_inputs`) and an evaluation
    case's that expects it (`converge_dsl.pipetest`, refused without a run)."""
    listed = f"declared inputs: {', '.join(declared) or 'none'}"
    return UsageError(
        f"unknown input '{written(name)}'",
        hint=unknown_name_hint(name, declared, listed),
        code=codes.INPUT_REFUSED,
    )


def _manifest(source: LoadedDocument | PipelineManifest) -> PipelineManifest:
    return source if isinstance(source, PipelineManifest) else build_manifest(source)


def declare_models(source: LoadedDocument | PipelineManifest) -> Mapping[str, ModelDeclaration]:
    """The typed `models:` declarations of a validated document or its manifest, in order.

    Needs no inputs: a tool may check the files a run reads before resolving them.
    """
    manifest = _manifest(source)
    base_dir = Path(manifest.file).parent
    models = {
        name: ModelDeclaration(
            name,
            spec,
            MappingProxyType({f: base_dir / value for f, value in spec.files.items()}),
            base_dir,
        )
        for name, spec in manifest.models.items()
    }
    return MappingProxyType(models)


def key_schemas(source: LoadedDocument | PipelineManifest) -> Mapping[str, JsonSchema]:
    """The `keys[].schema` of a validated document (or its manifest) by key name.

    Raises a located `PipelineInvalid` for a schema that is not a valid JSON
    Schema (draft 2020-12 unless its `$schema` says otherwise; CD605) or that
    is wider than the limits of `converge_dsl.sandbox` (CD130).
    """
    manifest = _manifest(source)
    schemas: dict[str, JsonSchema] = {}
    for key in manifest.keys:
        schema = key.schema
        if schema is None:
            continue
        problem = size_problems(schema)  # the size limits first: the meta check is linear
        if problem:
            where, message = problem[0]
            code, text = codes.SCHEMA_TOO_LARGE, f"the schema of key {key.name!r}: {message}"
        elif (error := meta_error(schema)) is not None:
            where, code = tuple(error.relative_path), codes.COMPILE_BAD_KEY_SCHEMA
            text = f"the schema of key {key.name!r} is not a valid JSON Schema: {error.message}"
        else:
            schemas[key.name] = schema
            continue
        path = (*key.path, "schema", *where)
        span = manifest.document.source_map.span(path)
        raise PipelineInvalid([Diagnostic.at(code, text, span, path=path)])
    return MappingProxyType(schemas)


def budget_of(spec: BudgetSpec) -> Budget:
    """The engine's `Budget` of `budget:` (the engine's defaults for what is not written)."""
    default = Budget()
    return Budget(
        max_cycles=_or(spec.max_cycles, default.max_cycles),
        max_facts=_or(spec.max_facts, default.max_facts),
        max_model_calls=_or(spec.max_model_calls, default.max_model_calls),
        max_tokens=_or(spec.max_tokens, default.max_tokens),
        max_wall_s=_or(spec.max_wall_s, default.max_wall_s),
        max_concurrency=_or(spec.max_concurrency, default.max_concurrency),
        max_tool_calls=_or(spec.max_tool_calls, default.max_tool_calls),
    )


def promotion_of(spec: PromotionSpec, schemas: Mapping[str, JsonSchema]) -> PromotionPolicy:
    """The engine's `PromotionPolicy` of `promotion:` (its defaults for what is not
    written), with the key schemas."""
    default = PromotionPolicy()
    return PromotionPolicy(
        min_confidence=_or(spec.min_confidence, default.min_confidence),
        max_content_length=_or(spec.max_content_length, default.max_content_length),
        require_provenance=_or(spec.require_provenance, default.require_provenance),
        forbidden_terms=_or(spec.forbidden_terms, default.forbidden_terms),
        gated_keys=_or(spec.gated_keys, default.gated_keys),
        confidence_threshold=_or(spec.confidence_threshold, default.confidence_threshold),
        key_schemas=schemas,
    )


def _or(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def _seed(spec: ProposalSpec, source: Provenance) -> ProposedFact:
    content, data = text_and_data(spec.content, spec.data)
    confidence = spec.confidence
    return ProposedFact(
        key=spec.key,
        id=spec.id,
        content=content,
        confidence=float(confidence) if isinstance(confidence, int | float) else 1.0,
        provenance=source,
        data=data,
    )


def compile_settings(
    source: LoadedDocument | PipelineManifest, *, inputs: JsonObject
) -> PipelineSettings:
    """The settings of a validated document or of its manifest (built once, reused).

    Raises `UsageError` for unknown or missing inputs, a located `PipelineInvalid`
    for a key schema that is not a valid JSON Schema.
    """
    manifest = _manifest(source)
    document = manifest.document
    name = manifest.name
    declared = tuple(dict.fromkeys([*BUILTIN_KEYS, *(k.name for k in manifest.keys)]))
    resolved = resolve_inputs(manifest.inputs, inputs)
    provenance = Provenance(f"seeds@{name}")  # one object shared by every seed
    seeds = tuple(_seed(s, provenance) for s in manifest.seeds)
    schemas = key_schemas(manifest)
    on_error: OnError = "diagnose" if manifest.on_error == "diagnose" else "stop"
    return PipelineSettings(
        name=name,
        file=document.file,
        base_dir=Path(document.file).parent,
        budget=budget_of(manifest.budget),
        promotion=promotion_of(manifest.promotion, schemas),
        on_error=on_error,
        inputs=MappingProxyType(resolved),
        declared_keys=declared,
        seeds=seeds,
        models=declare_models(manifest),
        document=document,
        key_schemas=schemas,
        manifest=manifest,
    )
