"""Semantic checks of the tool servers (`tools:`) and of the tools suggestors name.

Nothing here starts a server: a reference is checked against what the pipeline
declares (the server, its allow-list), a server's declaration against what the
schema cannot say (the url's host among `hosts`, `cwd` inside the pipeline's
folder or the allowed roots, a variable both passed and set). Codes CD260-CD264
(docs/errors.md). A pack's servers (`mcp:PACK/SERVER/TOOL`, `trust:`) are checked
by the pack checks, which read the pack (`converge_dsl.packs._pack_tools`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from converge_dsl import codes
from converge_dsl._escapes import quoted
from converge_dsl._files import ReferenceRefused, referenced_path, user_roots
from converge_dsl.diagnostics import Diagnostic, did_you_mean, suggestion
from converge_dsl.frontend._facts import PipelineFacts
from converge_dsl.frontend._tool_specs import (
    EVERY_TOOL,
    HttpServerSpec,
    StdioServerSpec,
    pack_server,
)
from converge_dsl.frontend.document import SourceMap


def _guess(word: str, candidates: tuple[str, ...] | list[str]) -> str | None:
    guess = did_you_mean(word, sorted(candidates))
    return suggestion(guess) if guess else None


def tool_references(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Each `mcp:SERVER/TOOL` a suggestor names: a declared server, a tool it allows. A
    pack's server (`mcp:PACK/SERVER/TOOL`) is the pack checks' (they read the pack)."""
    servers = facts.manifest.tools
    for spec in facts.specs:
        for path, server, tool in spec.tool_references():
            if pack_server(server) is not None:
                continue
            declared = servers.get(server)
            if declared is None:
                yield facts.error(
                    codes.UNKNOWN_TOOL_SERVER,
                    f"tool server {quoted(server)} is not declared",
                    path,
                    hint=_guess(server, list(servers))
                    or f"declare it under 'tools:' ({server}: {{command: [...], allow: [...]}})",
                )
            elif tool != EVERY_TOOL and tool not in declared.allow:
                yield facts.error(
                    codes.TOOL_NOT_ALLOWED,
                    f"tool {quoted(tool)} is not in the allow-list of server {quoted(server)} "
                    f"({', '.join(declared.allow)})",
                    path,
                    hint=_guess(tool, declared.allow)
                    or f"add {tool} to tools.{server}.allow, or name an allowed tool",
                )


def undeclared_host(server: HttpServerSpec, source_map: SourceMap, hint: str) -> Diagnostic | None:
    """CD262 at the url of `server` when it reaches a host its `hosts` do not list (a
    pipeline's server and a pack's alike); `hint` says who fixes it and how."""
    if server.host in {h.lower() for h in server.hosts}:
        return None
    return source_map.diagnostic(
        codes.TOOL_HOST_NOT_DECLARED,
        f"the url of tool server {quoted(server.name)} reaches host {quoted(server.host)}, "
        "which its hosts do not list",
        (*server.path, "url"),
        hint=hint,
    )


def tool_servers(facts: PipelineFacts, roots: Sequence[Path] | None = None) -> Iterator[Diagnostic]:
    """Each declared server's host, working folder and environment make sense.

    A working folder must lie in the pipeline's folder or one of `roots` (default:
    those of `CONVERGE_DSL_ALLOW_ROOTS` in the process's environment)."""
    for server in facts.manifest.tools.values():
        if isinstance(server, HttpServerSpec):
            fix = f"add {quoted(server.host)} to tools.{server.name}.hosts, or fix the url"
            found = undeclared_host(server, facts.source_map, fix)
            if found is not None:
                yield found
        elif isinstance(server, StdioServerSpec):
            yield from _stdio(facts, server, user_roots() if roots is None else roots)


def _stdio(
    facts: PipelineFacts, server: StdioServerSpec, roots: Sequence[Path]
) -> Iterator[Diagnostic]:
    for name in sorted(set(server.env_pass) & set(server.env_set)):
        yield facts.error(
            codes.TOOL_ENV_TWICE,
            f"variable {quoted(name)} of tool server {quoted(server.name)} is both passed and set",
            (*server.path, "env", "set", name),
            on_key=True,
            hint="keep it under one of env.pass (the parent's value) or env.set (this value)",
        )
    if server.cwd is None or facts.base_dir is None:
        return
    where = (*server.path, "cwd")
    try:
        folder = referenced_path(
            server.cwd, facts.base_dir, roots, field="working folder", read=False
        )
    except ReferenceRefused as refused:
        yield facts.error(
            codes.TOOL_CWD_REFUSED,
            f"working folder {quoted(server.cwd)} of tool server {quoted(server.name)} is "
            "outside the pipeline's folder",
            where,
            hint=refused.hint,
        )
        return
    if not Path(folder).is_dir():
        yield facts.error(
            codes.TOOL_CWD_REFUSED,
            f"working folder {quoted(server.cwd)} of tool server {quoted(server.name)} "
            "is not a folder",
            where,
            hint=_guess(server.cwd, _siblings(folder)) or "create it, or name an existing folder",
        )


def _siblings(folder: Path) -> list[str]:
    try:
        return [entry.name for entry in os.scandir(folder.parent) if entry.is_dir()]
    except OSError:
        return []


def pack_tool_packs(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """A pack's server (`mcp:PACK/SERVER/TOOL`, a `trust:` entry) names a pack of `packs:`."""
    declared = [p.name for p in facts.manifest.packs]
    named: list[tuple[tuple[str | int, ...], str, bool]] = [
        (("trust", pack), pack, True) for pack in facts.manifest.trust
    ]
    for spec in facts.specs:
        for path, server, _ in spec.tool_references():
            found = pack_server(server)
            if found is not None:
                named.append((path, found[0], False))
    for path, pack, on_key in named:
        if pack not in declared:
            yield facts.error(
                codes.PACK_TOOL_UNKNOWN,
                f"pack {quoted(pack)} is not among the pipeline's packs",
                path,
                on_key=on_key,
                hint=_guess(pack, declared)
                or f"add it under 'packs:' ({pack}: \">=1\") and run converge-dsl lock",
            )
