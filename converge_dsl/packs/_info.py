"""`pack info NAME[@VERSION]`: what a published pack offers, as a typed description.

`describe_pack(repository, "name@1.2.0")` reads the pack's index, picks the
version (the one named, else the newest that is not yanked, else the newest),
fetches its archive, checks the archive against the digest the index lists
(and its signature when the repository has trusted keys), unpacks it into a
temporary folder (with the caps of `_archive.unpack`), loads `pack.yaml` and
returns a `PackInfo`: every published version, and for each suggestor its
kind, parameters and input schema as outlines (`_outline`), what it emits
and the invariants that gate it. Nothing is cached, locked or executed.

Refusals carry codes: an unknown pack CD574, an unknown version CD573, an
archive that does not match its index CD570.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import Version

from converge_dsl import codes
from converge_dsl._json_types import JsonSchema
from converge_dsl.diagnostics import did_you_mean, unknown_name_hint
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import ToolServerSpec
from converge_dsl.packs._files import PackRefused
from converge_dsl.packs._index import IndexEntry, PackIndex
from converge_dsl.packs._manifest import InvariantDef, Pack, SuggestorDef, load_pack, parse_version
from converge_dsl.packs._outline import OutlineLine, outline, type_summary
from converge_dsl.packs._repository import Repository

_NAME = re.compile(r"[a-z][a-z0-9-]*\Z")  # the pack name pattern of schemas/pack.v1.json


@dataclass(frozen=True, slots=True)
class SuggestorInfo:
    """One suggestor of a pack, as `pack info` shows it."""

    name: str
    kind: str
    description: str
    complexity: str | None
    solver: str | None
    parameters: tuple[OutlineLine, ...]  # () when it takes none
    input_file: str | None  # the pack's input schema file (solvers), if it names one
    input_type: str | None  # the input schema's own type line (None: no schema known)
    input: tuple[OutlineLine, ...]
    output: tuple[str, ...]  # what it emits, in words
    invariants: tuple[InvariantDef, ...]
    prompt_files: tuple[tuple[str, str], ...] = ()  # (role, path in the pack): llm and agent

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "complexity": self.complexity,
            "solver": self.solver,
            "parameters": [_line_json(line) for line in self.parameters],
            "input_schema": self.input_file,
            "input_type": self.input_type,
            "input": [_line_json(line) for line in self.input],
            "output": list(self.output),
            "prompt_files": dict(self.prompt_files),
            "invariants": [
                {
                    "name": i.name,
                    "check": i.check,
                    "critical": i.critical,
                    "message": i.message,
                    "applies_to": i.suggestor or "every suggestor",
                }
                for i in self.invariants
            ],
        }


@dataclass(frozen=True, slots=True)
class PackInfo:
    """A published pack: its versions (newest first) and the chosen version's contents."""

    name: str
    repository: str
    version: Version
    versions: tuple[IndexEntry, ...]
    description: str
    requires_converge: str | None
    requires_packs: Mapping[str, str]
    suggestors: tuple[SuggestorInfo, ...]
    # Its MCP tool servers: what each starts or reaches (`transport_identity`) and `allow`.
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repository": self.repository,
            "version": str(self.version),
            "description": self.description,
            "requires": {
                "converge-dsl": self.requires_converge,
                "packs": dict(self.requires_packs),
            },
            "versions": [{**e.as_json(), "signed": bool(e.signature)} for e in self.versions],
            "suggestors": [s.as_json() for s in self.suggestors],
            "tools": {name: dict(server) for name, server in self.tools.items()},
        }


def _line_json(line: OutlineLine) -> dict[str, Any]:
    return {"depth": line.depth, "text": line.text}


def split_reference(text: str) -> tuple[str, str | None]:
    """`NAME[@VERSION]` -> (name, version or None)."""
    name, at, version = text.partition("@")
    return name, (version if at else None)


def _unknown_pack(repository: Repository, name: str) -> PackRefused:
    shown = "" if repository.id == "builtin" else f" --repo {repository.id}"
    listing = f"converge-dsl pack list{shown}"
    hint = unknown_name_hint(
        name,
        repository.names(),
        f"a pack of another repository needs --repo REPO (a folder or an http(s) URL), "
        f"e.g. converge-dsl pack info {name} --repo ./pack-repo; {listing} lists the packs here",
    )
    return PackRefused(codes.PACK_UNKNOWN, f"{repository.id} has no pack {name!r}", hint=hint)


def choose_entry(index: PackIndex, version: str | None, repository: str) -> IndexEntry:
    """The entry `version` names, or the newest live one (the newest yanked if all are)."""
    if version is None:
        candidates = [e for e in index.entries if not e.yanked] or list(index.entries)
        if not candidates:
            raise PackRefused(
                codes.PACK_VERSION_UNKNOWN, f"{repository} lists no version of {index.name}"
            )
        return candidates[-1]
    parsed = parse_version(version)
    found = index.entry(parsed) if parsed is not None else None
    if found is None:
        listed = [str(e.version) for e in index.entries]
        current = [str(e.version) for e in index.entries if not e.yanked] or listed
        guess = did_you_mean(version, listed)
        hint = f"did you mean {index.name}@{guess}?" if guess else None
        if hint is None and current:
            hint = f"ask for a published one, e.g. {index.name}@{current[-1]}"
        raise PackRefused(
            codes.PACK_VERSION_UNKNOWN,
            f"{repository} has no version {version!r} of {index.name} "
            f"(published: {', '.join(reversed(listed)) or 'none'})",
            hint=hint,
        )
    return found


def _fetch_pack(repository: Repository, name: str, entry: IndexEntry) -> Pack:
    from converge_dsl.packs._archive import sha256_hex, unpack
    from converge_dsl.packs._signing import verify

    version = str(entry.version)
    signature = dict(entry.signature) if entry.signature else None
    verify(signature, repository.trusted_keys, name, version, entry.sha256)
    data = repository.fetch_archive(name, version)
    actual = sha256_hex(data)
    if actual != entry.sha256:
        raise PackRefused(
            codes.REPOSITORY_ARCHIVE_MISMATCH,
            f"the archive of {name} {version} in {repository.id} has sha256 {actual[:16]}..., "
            f"its index lists {entry.sha256[:16]}...: it was altered after publishing; "
            "nothing was unpacked",
            hint="ask the repository owner to publish it again",
        )
    with tempfile.TemporaryDirectory(prefix="converge-pack-info-") as temporary:
        folder = Path(temporary) / "pack"
        unpack(data, folder, f"archive of {name} {version} from {repository.id}")
        try:
            pack = load_pack(folder, display=f"{name}-{version}")
        except PipelineInvalid as exc:
            first = exc.diagnostics[0] if exc.diagnostics else None
            detail = f": {first.message}" if first is not None else ""
            raise PackRefused(
                codes.REPOSITORY_ARCHIVE_MISMATCH,
                f"the archive of {name} {version} in {repository.id} holds an invalid "
                f"pack.yaml{detail}",
            ) from None
    if pack.name != name or pack.version != entry.version:
        raise PackRefused(
            codes.REPOSITORY_ARCHIVE_MISMATCH,
            f"the archive listed as {name} {version} in {repository.id} holds "
            f"{pack.name} {pack.version}",
        )
    return pack


def _solver_schema(solver: str | None) -> JsonSchema | None:
    """The installed solver's own input schema (None when it is not installed or fails)."""
    if solver is None:
        return None
    from converge_dsl.errors import PackError
    from converge_dsl.packs._registry import installed_solvers

    registry = installed_solvers()
    if solver not in registry:
        return None
    try:
        return registry.get(solver).input_schema()
    except PackError:
        return None


def _output(definition: SuggestorDef) -> tuple[str, ...]:
    """What a suggestor emits, in words (see `_suggestor` and `_compile.instantiate_template`)."""
    template = definition.template or {}
    if definition.kind == "solver":
        return (
            "one fact NAME-plan (NAME: the suggestor's name in the pipeline) in the pipeline's "
            "output: key; content: the solver's summary; data: {plan, summary}, plus review "
            "when an advisory invariant fails",
            "instead, a diagnostic fact pack:rejected:NAME when the input does not fit the "
            "schema, the solver fails or a critical invariant fails",
        )
    if definition.kind == "rule":
        lines = []
        emit = template.get("emit")
        for item in emit if isinstance(emit, list) else ():
            if isinstance(item, Mapping):
                key = item.get("key", "the pipeline's output: key")
                lines.append(f"fact {item.get('id', '?')} in {key}")
        return tuple(lines) or ("facts in the pipeline's output: key",)
    spec = template.get("output")
    target = template.get("target", "the pipeline's output: key")
    if not isinstance(spec, Mapping):
        return (f"the model's answer, as facts in {target}",)
    words = [f"{spec.get('format', 'text')} answer as facts in {target}"]
    for field_name in ("id", "content", "confidence"):
        if field_name in spec:
            words.append(f"{field_name}: {spec[field_name]}")
    schema = spec.get("schema")
    if isinstance(schema, Mapping):
        words.append(f"each item: {type_summary(schema)}")
    return ("; ".join(words),)


def _parameters(schema: JsonSchema) -> tuple[OutlineLine, ...]:
    """The `with:` parameters as an outline; () when none are accepted."""
    lines = outline(schema)
    if not lines and schema.get("additionalProperties", True) is not False:
        return (OutlineLine(0, "(any: the pack does not describe them)"),)
    return lines


def describe_suggestor(pack: Pack, definition: SuggestorDef) -> SuggestorInfo:
    """How `definition` of `pack` is used: parameters, input, output, invariants."""
    schema = definition.input_schema
    if schema is None and definition.kind == "solver":
        schema = _solver_schema(definition.solver)
    raw = pack.document.data if pack.document is not None else {}
    declared = (raw.get("suggestors") or {}).get(definition.name) or {}
    input_file = declared.get("input_schema") if isinstance(declared, Mapping) else None
    return SuggestorInfo(
        name=definition.name,
        kind=definition.kind,
        description=" ".join(definition.description.split()),
        complexity=definition.complexity,
        solver=definition.solver,
        parameters=_parameters(definition.parameters),
        input_file=input_file if isinstance(input_file, str) else None,
        input_type=type_summary(schema) if schema is not None else None,
        input=outline(schema),
        output=_output(definition),
        # Invariants gate solver plans only (`_suggestor`); templates are built as pipeline kinds.
        invariants=pack.invariants_for(definition.name) if definition.kind == "solver" else (),
        prompt_files=tuple(sorted(definition.prompt_files.items())),
    )


def describe(pack: Pack, index: PackIndex, repository: str) -> PackInfo:
    """The `PackInfo` of a loaded `pack` whose versions `index` lists."""
    return PackInfo(
        name=pack.name,
        repository=repository,
        version=pack.version,
        versions=tuple(reversed(index.entries)),
        description=" ".join(pack.description.split()),
        requires_converge=str(pack.requires_converge) if pack.requires_converge else None,
        requires_packs={k: str(v) for k, v in sorted(pack.requires_packs.items())},
        suggestors=tuple(describe_suggestor(pack, d) for d in pack.suggestors.values()),
        tools={name: _server(spec) for name, spec in pack.tools.items()},
    )


def _server(spec: ToolServerSpec) -> dict[str, Any]:
    from converge_dsl.tools import transport_identity

    return {**transport_identity(spec), "allow": list(spec.allow)}


def describe_pack(repository: Repository, reference: str) -> PackInfo:
    """`pack info NAME[@VERSION]` against `repository` (see the module docstring)."""
    name, version = split_reference(reference)
    if not _NAME.match(name):
        raise PackRefused(
            codes.PACK_UNKNOWN,
            f"{name!r} is not a pack name (lowercase letters, digits and '-', "
            "starting with a letter)",
            hint="write NAME or NAME@VERSION, e.g. optimization@1.0.0",
        )
    index = repository.fetch_index(name)
    if index is None:
        raise _unknown_pack(repository, name)
    entry = choose_entry(index, version, repository.id)
    return describe(_fetch_pack(repository, name, entry), index, repository.id)
