"""`pack.yaml`: load, validate and represent a pack manifest.

`load_pack(folder)` reads `folder/pack.yaml` with the front-end loader,
validates it against `schemas/pack.v1.json`, then checks what a schema cannot:
the version is semver, specifiers parse, files named by `input_schema` and
`prompt_files` exist inside the pack, invariants name real suggestors and
their checks compile, and each MCP tool server under `tools:` (declared as a
pipeline declares one, `frontend.tool_server_spec`) stays inside the pack: a
stdio server's `cwd` and a program named by a path are relative to the pack's
folder and may not leave it (CD268); an HTTP server's url reaches a host it
lists (CD262). Every problem is reported at once as a `PipelineInvalid`
carrying diagnostics (codes `PACK_*` of `converge_dsl.codes`, CD550 onwards).

A `Pack` is immutable data: nothing in it is ever imported or executed here. Its
tool servers are started by a run only when the pipeline trusts them (`trust:`,
`_pack_tools`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from converge_dsl import codes
from converge_dsl._json_types import JsonObject, JsonSchema
from converge_dsl._reading import read_text
from converge_dsl.diagnostics import Diagnostic, JsonPath, best_first
from converge_dsl.errors import PipelineInvalid
from converge_dsl.frontend import (
    HttpServerSpec,
    StdioServerSpec,
    ToolServerSpec,
    tool_server_spec,
    undeclared_host,
)
from converge_dsl.frontend.document import LoadedDocument
from converge_dsl.packs._yaml import load_document, schema_diagnostics

MANIFEST = "pack.yaml"
PACK_SCHEMA = "pack.v1.json"


@dataclass(frozen=True, slots=True)
class SuggestorDef:
    """One suggestor a pack offers. `template` is None for solvers; `solver` None otherwise."""

    name: str
    kind: str
    description: str = ""
    complexity: str | None = None
    parameters: JsonSchema = field(default_factory=dict)
    solver: str | None = None
    input_schema: JsonSchema | None = None
    template: JsonObject | None = None  # the suggestor it stands for, as a pipeline writes it
    prompt_files: Mapping[str, str] = field(default_factory=dict)  # role -> path in the pack


@dataclass(frozen=True, slots=True)
class InvariantDef:
    """A plan invariant. `suggestor` None means every suggestor of the pack."""

    name: str
    check: str
    suggestor: str | None = None
    critical: bool = True
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Pack:
    """A loaded, validated pack."""

    name: str
    version: Version
    description: str
    requires_converge: SpecifierSet | None
    requires_packs: Mapping[str, SpecifierSet]
    suggestors: Mapping[str, SuggestorDef]
    invariants: tuple[InvariantDef, ...]
    folder: Path
    # `pack.yaml` as loaded, for diagnostics located in the pack's own files
    # (`display` names the pack folder in them).
    document: LoadedDocument | None = field(default=None, compare=False, repr=False)
    display: str = ""
    # Its MCP tool servers by name (relative to `folder`); run only when a pipeline trusts them.
    tools: Mapping[str, ToolServerSpec] = field(default_factory=dict)

    def invariants_for(self, suggestor: str) -> tuple[InvariantDef, ...]:
        return tuple(i for i in self.invariants if i.suggestor in (None, suggestor))


def parse_specifier(text: str) -> SpecifierSet | None:
    """A PEP 440 specifier set, or None when `text` is not one."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def parse_version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _inside(folder: Path, relative: str) -> Path | None:
    """`folder/relative` when it stays inside `folder` and is a file; else None."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts:
        return None
    target = folder.joinpath(*pure.parts)
    return target if target.is_file() else None


def _within(root: Path, base: Path, relative: str) -> Path | None:
    """`base/relative` resolved, when `relative` is a relative path without `..` and what
    it resolves to (links followed) lies inside `root`; else None."""
    pure = PurePosixPath(relative)
    if pure.is_absolute() or ".." in pure.parts:
        return None
    target = base.joinpath(*pure.parts).resolve()
    return target if target == root or target.is_relative_to(root) else None


class _Builder:
    """Turns a schema-valid document into a `Pack`, collecting semantic diagnostics."""

    def __init__(self, doc: LoadedDocument, folder: Path, display: str) -> None:
        self.doc = doc
        self.folder = folder
        self.display = display
        self.found: list[Diagnostic] = []

    def error(self, code: str, message: str, path: JsonPath, hint: str | None = None) -> None:
        span = self.doc.source_map.span(path)
        self.found.append(Diagnostic.at(code, message, span, path=path, hint=hint))

    def read_json(self, relative: str, path: JsonPath) -> JsonSchema | None:
        target = _inside(self.folder, relative)
        if target is None:
            self.error(
                codes.PACK_BAD_FILE, f"file {relative!r} is not a file inside the pack", path
            )
            return None
        try:
            value = json.loads(read_text(target, "pack file"))
        except RecursionError:
            self.error(codes.PACK_BAD_FILE, f"JSON Schema {relative!r} is nested too deeply", path)
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.error(codes.PACK_BAD_FILE, f"cannot read JSON Schema {relative!r}: {exc}", path)
            return None
        if not isinstance(value, dict):
            self.error(
                codes.PACK_BAD_FILE, f"{relative!r} must hold a JSON object (a JSON Schema)", path
            )
            return None
        return value

    def template(self, raw: Mapping[str, Any], path: JsonPath) -> JsonObject:
        body = dict(raw.get("template", {}))
        files = raw.get("prompt_files") or {}
        if files:
            prompt = dict(body.get("prompt") or {})
            for role, relative in files.items():
                target = _inside(self.folder, relative)
                if target is None:
                    self.error(
                        codes.PACK_BAD_FILE,
                        f"prompt file {relative!r} is not a file inside the pack",
                        (*path, "prompt_files", role),
                    )
                    continue
                try:
                    prompt[role] = read_text(target, "pack file")
                except (OSError, UnicodeDecodeError) as exc:
                    self.error(
                        codes.PACK_BAD_FILE,
                        f"cannot read prompt file {relative!r}: {exc}",
                        (*path, "prompt_files", role),
                    )
            body["prompt"] = prompt
        return body

    def suggestor(self, name: str, raw: Mapping[str, Any]) -> SuggestorDef:
        path: JsonPath = ("suggestors", name)
        schema = None
        if "input_schema" in raw:
            schema = self.read_json(raw["input_schema"], (*path, "input_schema"))
        return SuggestorDef(
            name=name,
            kind=raw["kind"],
            description=raw.get("description", ""),
            complexity=raw.get("complexity"),
            parameters=raw.get("parameters") or {"type": "object"},
            solver=raw.get("solver"),
            input_schema=schema,
            template=None if raw["kind"] == "solver" else self.template(raw, path),
            prompt_files=dict(raw.get("prompt_files") or {}),
        )

    def invariants(self, raw: list[Any], names: Mapping[str, Any]) -> Iterator[InvariantDef]:
        from converge_dsl.frontend import expression_error

        for index, item in enumerate(raw):
            path: JsonPath = ("invariants", index)
            target = item.get("suggestor")
            if target is not None and target not in names:
                from converge_dsl.diagnostics import did_you_mean, suggestion

                guess = did_you_mean(target, names)
                self.error(
                    codes.PACK_UNKNOWN_SUGGESTOR,
                    f"invariant {item['name']!r} names unknown suggestor {target!r}",
                    (*path, "suggestor"),
                    hint=suggestion(guess) if guess else None,
                )
            problem = expression_error(item["check"])
            if problem is not None:
                self.error(
                    codes.PACK_BAD_CHECK,
                    f"invariant check does not compile: {problem}",
                    (*path, "check"),
                )
            yield InvariantDef(
                name=item["name"],
                check=item["check"],
                suggestor=target,
                critical=item.get("critical", True),
                message=item.get("message"),
            )

    def tool_servers(self, raw: Mapping[str, Any]) -> dict[str, ToolServerSpec]:
        servers: dict[str, ToolServerSpec] = {}
        for name, config in raw.items():
            spec = tool_server_spec(str(name), config, ("tools", str(name)), self.doc.source_map)
            if isinstance(spec, StdioServerSpec):
                self.stdio_inside(spec)
            elif isinstance(spec, HttpServerSpec):
                found = undeclared_host(
                    spec, self.doc.source_map, "the pack must be fixed by its author"
                )
                if found is not None:
                    self.found.append(found)
            servers[spec.name] = spec
        return servers

    def stdio_inside(self, spec: StdioServerSpec) -> None:
        """CD268 unless the server's `cwd` is a folder of the pack and a program named by
        a relative path is a file of the pack (links followed: the target must be inside
        too). A bare program name is looked up in the run's PATH, an absolute one is
        taken as it is: neither is the pack's, and trust (`trust:`) is what gates them."""
        root = self.folder.resolve()
        cwd = self.folder
        if spec.cwd is not None:
            found = _within(root, self.folder, spec.cwd)
            if found is None or not found.is_dir():
                self.error(
                    codes.PACK_TOOL_OUTSIDE,
                    f"working folder {spec.cwd!r} of tool server {spec.name!r} is not a "
                    "folder inside the pack",
                    (*spec.path, "cwd"),
                    hint="a pack's server runs in the pack's own folder or one inside it",
                )
                return
            cwd = found
        program = spec.command[0] if spec.command else ""
        if "/" in program and not program.startswith("/"):  # absolute: like a bare name
            found = _within(root, cwd, program)
            if found is None or not found.is_file():
                self.error(
                    codes.PACK_TOOL_OUTSIDE,
                    f"program {program!r} of tool server {spec.name!r} is not a file inside "
                    "the pack",
                    (*spec.path, "command", 0),
                    hint="name a file of the pack relative to the server's working folder, "
                    "or a program by its bare name (looked up in the PATH of the run)",
                )

    def build(self) -> Pack:
        data = self.doc.data
        version = parse_version(data["version"])
        requires = data.get("requires") or {}
        converge = None
        if "converge-dsl" in requires:
            converge = parse_specifier(requires["converge-dsl"])
            if converge is None:
                self.error(
                    codes.PACK_BAD_REQUIRES, "not a PEP 440 specifier", ("requires", "converge-dsl")
                )
        packs: dict[str, SpecifierSet] = {}
        for name, text in (requires.get("packs") or {}).items():
            spec = parse_specifier(text)
            if spec is None:
                self.error(
                    codes.PACK_BAD_REQUIRES,
                    f"{text!r} is not a PEP 440 specifier",
                    ("requires", "packs", name),
                    hint='write e.g. ">=1.0,<2"',
                )
            else:
                packs[name] = spec
        suggestors = {n: self.suggestor(n, raw) for n, raw in data["suggestors"].items()}
        invariants = tuple(self.invariants(data.get("invariants") or [], suggestors))
        tools = self.tool_servers(data.get("tools") or {})
        if version is None:  # the schema pattern makes this unreachable in practice
            self.error(
                codes.PACK_BAD_VERSION, f"{data['version']!r} is not a version", ("version",)
            )
        if self.found:
            raise PipelineInvalid(best_first(self.found))
        assert version is not None
        return Pack(
            name=data["name"],
            version=version,
            description=data.get("description", ""),
            requires_converge=converge,
            requires_packs=packs,
            suggestors=suggestors,
            invariants=invariants,
            folder=self.folder,
            document=self.doc,
            display=self.display,
            tools=tools,
        )


def load_pack(folder: Path, *, display: str | None = None) -> Pack:
    """Load and validate `folder/pack.yaml`; raises `PipelineInvalid` or `PackError`.

    Diagnostics name the pack's files `DISPLAY/RELATIVE` (default: `folder` itself).
    """
    shown = display if display is not None else folder.as_posix()
    doc = load_document(folder / MANIFEST, display=f"{shown}/{MANIFEST}")
    problems = [d for d in schema_diagnostics(doc, PACK_SCHEMA) if d.is_error]
    if problems:
        raise PipelineInvalid(best_first(problems))
    return _Builder(doc, folder, shown).build()
