"""The pipeline's MCP tool servers in its lock: recorded by `lock`, checked by `validate`.

`lock_tool_servers(pipeline)` starts each server the pipeline declares under
`tools:`, one after the other, each bounded by its `start_timeout_s`, reads its
`initialize` answer and `tools/list`, and stops it (its process group too)
whatever happens: the `LockedServer` records `lock` writes into the
pipeline's section. A server that does not start fails the lock with its
`ToolFailure` (CD963...), and nothing is written.

`check_tool_lock(facts)` is validate's check, from the lock only (no server is
started): nothing for a pipeline without a lock section (a run then reads the
tools live, as without a lock); with one, a declared server it does not record
(or records with another command or url) is a warning, CD266, naming the
command that re-locks, and every tool the pipeline names (`allow`, an agent's
`mcp:SERVER/TOOL`, a tool suggestor's `call`) that the locked tool list lacks
is an error, CD265, with a "did you mean" (`not_offered`, which reports a pack's
server too). `locked_tool_servers(pipeline)` is what a run holds its servers to.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from converge_dsl import codes
from converge_dsl.diagnostics import Diagnostic, JsonPath, unknown_name_hint
from converge_dsl.errors import PackError, PipelineInvalid
from converge_dsl.frontend import (
    EVERY_TOOL,
    PipelineFacts,
    SourceMap,
    ToolServerSpec,
    tool_server_spec,
)
from converge_dsl.packs._files import PackRefused
from converge_dsl.packs._lockfile import lock_hint, lock_path, read_lock
from converge_dsl.packs._yaml import load_document, schema_diagnostics
from converge_dsl.tools import (
    LockedServer,
    ServerFactory,
    lock_server,
    real_server,
    transport_identity,
)

PIPELINE_SCHEMA = "pipeline.v1.json"


def declared_tool_servers(pipeline: Path) -> dict[str, ToolServerSpec]:
    """The typed `tools:` records of the pipeline file (its schema checked for them)."""
    doc = load_document(pipeline)
    data = doc.data if isinstance(doc.data, Mapping) else {}
    raw = data.get("tools") or {}
    if not isinstance(raw, Mapping):
        raise PackRefused(
            codes.PIPELINE_PACKS_MALFORMED,
            f"{pipeline.name}: tools: must be a mapping of server name to server",
        )
    found = [d for d in schema_diagnostics(doc, PIPELINE_SCHEMA) if d.path[:1] == ("tools",)]
    if found:
        raise PipelineInvalid(found)
    return {
        str(name): tool_server_spec(str(name), config, ("tools", str(name)), doc.source_map)
        for name, config in raw.items()
    }


def lock_tool_servers(
    pipeline: Path,
    *,
    factory: ServerFactory | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, LockedServer]:
    """Each declared server started, read and stopped (see the module docstring)."""
    specs = declared_tool_servers(pipeline)
    make = factory or real_server
    parent = dict(os.environ if environ is None else environ)
    base_dir = pipeline.resolve().parent
    return {name: lock_server(spec, make(spec, base_dir, parent)) for name, spec in specs.items()}


def locked_tool_servers(pipeline: Path) -> dict[str, LockedServer]:
    """The servers the lock of `pipeline` records ({} without a lock or a readable one)."""
    try:
        lock = read_lock(pipeline)
    except PackError:
        return {}
    return {} if lock is None else dict(lock.tools)


def check_tool_lock(facts: PipelineFacts) -> Iterator[Diagnostic]:
    """Validate's check of the tools against the lock (see the module docstring)."""
    servers = facts.manifest.tools
    if not servers or facts.base_dir is None:
        return
    pipeline = facts.base_dir / Path(facts.document.file).name
    hint = lock_hint(Path(facts.document.file))
    try:
        lock = read_lock(pipeline)
    except PackError:
        return  # the pack checks report an unreadable lock; a run reads the tools live
    if lock is None:
        return
    usable: dict[str, LockedServer] = {}
    for name, declared in servers.items():
        record = lock.tools.get(name)
        if record is None:
            yield facts.warning(
                codes.TOOL_SERVER_NOT_LOCKED,
                f"tool server {name!r} is not in {lock_path(pipeline).name}: its tools are "
                "read when it starts, unchecked",
                declared.path,
                on_key=True,
                hint=hint,
            )
        elif record.transport != transport_identity(declared):
            yield facts.warning(
                codes.TOOL_SERVER_NOT_LOCKED,
                f"tool server {name!r} was locked as another server (its "
                f"{'url' if declared.transport == 'http' else 'command or environment'} changed "
                "since): its tools are read when it starts, unchecked",
                declared.path,
                on_key=True,
                hint=hint,
            )
        else:
            usable[name] = record
    reported: set[tuple[str, str]] = set()
    for spec in facts.specs:
        for path, server, tool in spec.tool_references():
            record = usable.get(server)
            if record is None or tool == EVERY_TOOL or tool in record.tool_names():
                continue
            reported.add((server, tool))
            yield not_offered(facts.source_map, record, tool, path, hint)
    for name, record in usable.items():
        for index, tool in enumerate(servers[name].allow):
            if tool not in record.tool_names() and (name, tool) not in reported:
                where = (*servers[name].path, "allow", index)
                yield not_offered(facts.source_map, record, tool, where, hint)


def not_offered(
    source_map: SourceMap, record: LockedServer, tool: str, path: JsonPath, relock: str
) -> Diagnostic:
    """CD265 at `path`: the locked tool list of `record` (a pipeline's server or a pack's,
    `PACK/SERVER`) lacks `tool`; `relock` is the command that locks the pipeline again."""
    names = record.tool_names()
    return source_map.diagnostic(
        codes.TOOL_NOT_OFFERED,
        f"server {record.name!r} offers no tool {tool!r} (locked: {', '.join(names) or 'none'})",
        path,
        hint=unknown_name_hint(
            tool,
            sorted(names),
            f"name one of its tools; if the server gained {tool!r} since, {relock}",
        ),
    )
