"""A pack's MCP tool servers as a pipeline uses them: trusted, checked, locked and run.

A pack declares servers under its own `tools:` (`Pack.tools`, the pipeline's
declaration). A pipeline names their tools `mcp:PACK/SERVER/TOOL`; in a run,
in the lock's `tools` section, in a cassette and in the answer cache the
server is `PACK/SERVER`. A pack's server runs a command on the user's machine
(or sends a host the values of the variables its headers name), so it is
started only when the pipeline trusts it: `trust: {PACK: [SERVER, ...]}`.
Trust is a top-level section rather than a field of the `packs:` entry because
those entries are version specifiers that `lock` and `pack add` write back,
and because one section lists, for a reviewer, every command the pipeline
lets packs run.

- `pack_servers(packs, trust, pins)`: the trusted servers, each renamed
  `PACK/SERVER`, with the pack's folder (where its `cwd` and a program named by a
  path are resolved) and the pack's pin in the lock (its version and archive
  digest, which key the server's cached answers: an upgraded pack may run another
  script behind the same tool list); `_workspace.trusted_pack_servers` gives them
  for a run.
- `lock_pack_servers(...)`: `lock` pins the trusted servers, started in the
  pack's fetched folder, read and stopped like a pipeline's.
- `check_pack_tools(...)`: validate's check, from the cache and the lock only
  (nothing is started): a server the pack does not declare (CD270), a tool
  outside its allow-list (CD261), a server used but not trusted (CD269, naming
  the line to add), a trust entry naming no server of the pack (CD270), and,
  with a lock, a tool the locked list lacks (CD265) or a trusted server the lock
  does not pin (warning CD266).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, Severity, unknown_name_hint
from converge_dsl.errors import PackError
from converge_dsl.frontend import (
    EVERY_TOOL,
    HttpServerSpec,
    LoadedDocument,
    PipelineManifest,
    SourceMap,
    StdioServerSpec,
    ToolServerSpec,
    pack_server,
)

if TYPE_CHECKING:
    from converge_dsl.frontend import PipelineFacts, SuggestorSpec
    from converge_dsl.packs._manifest import Pack
    from converge_dsl.tools import LockedServer, ServerFactory


@dataclass(frozen=True)
class PackServer:
    """A pack's server as a run knows it: its declaration named `PACK/SERVER`, the pack's
    folder, and the pack's pin in the lock (`{"version", "sha256"}`; empty when the
    packs were not read from a lock)."""

    spec: ToolServerSpec
    folder: Path
    pin: Mapping[str, str] = field(default_factory=dict)


def pack_servers(
    packs: Mapping[str, Pack],
    trust: Mapping[str, tuple[str, ...]],
    pins: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, PackServer]:
    """The servers `trust` lists that the packs declare, by `PACK/SERVER`, each with its
    pack's entry of `pins` (by pack name)."""
    found: dict[str, PackServer] = {}
    for pack_name, servers in trust.items():
        pack = packs.get(pack_name)
        if pack is None:
            continue
        pin = dict((pins or {}).get(pack_name, {}))
        for server in servers:
            spec = pack.tools.get(server)
            if spec is not None:
                name = f"{pack_name}/{server}"
                found[name] = PackServer(spec._replace(name=name), pack.folder, pin)
    return found


def lock_pack_servers(
    packs: Mapping[str, Pack],
    trust: Mapping[str, tuple[str, ...]],
    factory: ServerFactory,
    environ: Mapping[str, str],
) -> dict[str, LockedServer]:
    """Each trusted pack server started in its pack's folder, read and stopped, one after
    the other (a `ToolFailure` of one that does not start)."""
    from converge_dsl.tools import lock_server

    return {
        name: lock_server(found.spec, factory(found.spec, found.folder, environ))
        for name, found in pack_servers(packs, trust).items()
    }


def _references(
    facts: PipelineFacts, templates: Mapping[JsonPath, SuggestorSpec]
) -> Iterator[tuple[JsonPath, str, str, str]]:
    """(path, pack, server, tool) of each pack server's tool the pipeline names: its own
    suggestors', then those of the pack templates it uses (`templates`, by the path of
    their `kind: pack` entry; located at its `use:`)."""
    for spec in facts.specs:
        for path, server, tool in spec.tool_references():
            found = pack_server(server)
            if found is not None:
                yield path, found[0], found[1], tool
    for where, body in templates.items():
        for _, server, tool in body.tool_references():
            found = pack_server(server)
            if found is not None:
                yield (*where, "use"), found[0], found[1], tool


def _what_it_runs(spec: ToolServerSpec) -> str:
    if isinstance(spec, StdioServerSpec):
        return f"it runs {json.dumps(list(spec.command))} on this machine"
    assert isinstance(spec, HttpServerSpec)
    return f"it reaches {spec.url}"


def _trust_line(pack: str, trusted: tuple[str, ...], server: str) -> str:
    return f"{pack}: [{', '.join([*trusted, server])}]"


def _no_such_server(smap: SourceMap, pack: Pack, server: str, path: JsonPath) -> Diagnostic:
    """CD270 at `path`: `pack` declares no tool server `server` (a `trust:` entry or a
    tool reference naming it)."""
    declared = sorted(pack.tools)
    return smap.diagnostic(
        codes.PACK_TOOL_UNKNOWN,
        f"pack {pack.name} {pack.version} declares no tool server {server!r}",
        path,
        hint=unknown_name_hint(
            server, declared, f"it declares: {', '.join(declared) or 'no tool server'}"
        ),
    )


def check_pack_tools(
    doc: LoadedDocument,
    packs: Mapping[str, Pack],
    manifest: PipelineManifest,
    facts: PipelineFacts,
    pipeline: Path,
    *,
    templates: Mapping[JsonPath, SuggestorSpec],
) -> Iterator[Diagnostic]:
    """Validate's check of the pack servers a pipeline uses (see the module docstring);
    `templates` are the pack templates it uses as bound (`_checks.template_specs`)."""
    smap = doc.source_map
    trust = manifest.trust
    for pack_name, servers in trust.items():
        pack = packs.get(pack_name)
        if pack is None:
            continue
        for index, server in enumerate(servers):
            if server not in pack.tools:
                yield _no_such_server(smap, pack, server, ("trust", pack_name, index))
    untrusted: set[tuple[str, str]] = set()
    used: dict[str, list[tuple[JsonPath, str]]] = {}
    for path, pack_name, server, tool in _references(facts, templates):
        pack = packs.get(pack_name)
        if pack is None:
            continue  # not among `packs:` (the front end says so), or not fetched
        spec = pack.tools.get(server)
        if spec is None:
            yield _no_such_server(smap, pack, server, path)
            continue
        if tool != EVERY_TOOL and tool not in spec.allow:
            yield smap.diagnostic(
                codes.TOOL_NOT_ALLOWED,
                f"tool {tool!r} is not in the allow-list of server {server!r} of pack "
                f"{pack_name} ({', '.join(spec.allow)})",
                path,
                hint=unknown_name_hint(
                    tool, sorted(spec.allow), "name one of the tools the pack allows"
                ),
            )
            continue
        trusted = trust.get(pack_name, ())
        if server not in trusted:
            if (pack_name, server) not in untrusted:
                untrusted.add((pack_name, server))
                line = _trust_line(pack_name, trusted, server)
                where = f"under 'trust:' write {line}" if trust else f"add: trust: {{{line}}}"
                yield smap.diagnostic(
                    codes.PACK_TOOL_UNTRUSTED,
                    f"tool server {server!r} of pack {pack_name} is not trusted by this "
                    f"pipeline: {_what_it_runs(spec)}; nothing is started without trust",
                    path,
                    hint=f"if you trust it, {where}",
                )
            continue
        used.setdefault(f"{pack_name}/{server}", []).append((path, tool))
    if used:
        yield from _against_lock(doc, packs, pipeline, used)


def _against_lock(
    doc: LoadedDocument,
    packs: Mapping[str, Pack],
    pipeline: Path,
    used: Mapping[str, list[tuple[JsonPath, str]]],
) -> Iterator[Diagnostic]:
    """CD265 / CD266 of the trusted pack servers used, from the lock."""
    from converge_dsl.packs._lockfile import lock_hint, lock_path, read_lock
    from converge_dsl.packs._tool_lock import not_offered
    from converge_dsl.tools import transport_identity

    try:
        lock = read_lock(pipeline)
    except PackError:
        return  # the pack checks report an unreadable lock
    if lock is None:
        return
    hint = lock_hint(Path(doc.file))
    for name, references in used.items():
        pack_name, _, server = name.partition("/")
        spec = packs[pack_name].tools[server]
        record = lock.tools.get(name)
        first = references[0][0]
        if record is None or record.transport != transport_identity(spec):
            yield doc.source_map.diagnostic(
                codes.TOOL_SERVER_NOT_LOCKED,
                f"tool server {name!r} is not in {lock_path(pipeline).name} as the pack "
                "declares it: its tools are read when it starts, unchecked",
                first,
                hint=hint,
                severity=Severity.WARNING,
            )
            continue
        names = record.tool_names()
        for path, tool in references:
            if tool != EVERY_TOOL and tool not in names:
                yield not_offered(doc.source_map, record, tool, path, hint)
