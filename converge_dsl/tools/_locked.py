"""A tool server as the lock pins it, and the server that holds a run to that pin.

`LockedServer` is one server's record in the lock file (docs/tools.md): the
declared name, its transport identity (`transport_identity`: what is started
or reached, never a secret), the name and version the server gave in its
`initialize` answer, the digest of its tool list (`ServerInfo.digest`) and the
tools themselves (name, description, input schema), so `validate` can check
names and a run can offer the tools to a model without starting the server.
`lock_server` starts one server (bounded by its `start_timeout_s`), reads that
and stops it, whatever happens.

`LockedToolServer` wraps the tools port for a locked server: `start()` answers
the locked `ServerInfo` without starting anything; the first `call` starts the
real server and, before anything is sent, compares its tool list's digest
with the lock's: a difference is `ToolListChanged` (CD267), located at the
server's declaration and naming the command that re-locks. A `ToolFailure`
of that start is the call's, as for any server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl.diagnostics import SourceSpan
from converge_dsl.errors import RunError
from converge_dsl.frontend import HttpServerSpec, StdioServerSpec, ToolServerSpec
from converge_dsl.tools._port import ServerInfo, ToolInfo, ToolResult, ToolServer


def transport_identity(spec: ToolServerSpec) -> dict[str, Any]:
    """What `spec` starts or reaches, as JSON: the command, working folder and the
    environment's names and set values of a stdio server; the url and header names of
    an HTTP one. No value read from the environment is in it."""
    if isinstance(spec, HttpServerSpec):
        return {"transport": "http", "url": spec.url, "headers": sorted(spec.headers)}
    assert isinstance(spec, StdioServerSpec)
    return {
        "transport": "stdio",
        "command": list(spec.command),
        "cwd": spec.cwd or ".",
        "env_pass": sorted(spec.env_pass),
        "env_set": dict(sorted(spec.env_set.items())),
    }


@dataclass(frozen=True)
class LockedServer:
    """One tool server's record in the lock (see the module docstring)."""

    name: str
    transport: Mapping[str, Any]
    server_name: str
    server_version: str
    digest: str
    tools: tuple[ToolInfo, ...]

    def info(self) -> ServerInfo:
        return ServerInfo(self.server_name, self.server_version, self.tools)

    def tool_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tools)

    def as_json(self) -> dict[str, Any]:
        return {
            "transport": dict(self.transport),
            "server": {"name": self.server_name, "version": self.server_version},
            "digest": self.digest,
            "tools": [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in self.tools
            ],
        }

    @classmethod
    def from_json(cls, name: str, raw: object) -> LockedServer:
        """The record of server `name`; `ValueError` naming what is malformed."""
        if not isinstance(raw, Mapping):
            raise ValueError("it is not an object")
        transport, server, tools = raw.get("transport"), raw.get("server"), raw.get("tools")
        if not isinstance(transport, Mapping) or not isinstance(transport.get("transport"), str):
            raise ValueError("'transport' is not a transport object")
        if not isinstance(server, Mapping) or not all(
            isinstance(server.get(f), str) for f in ("name", "version")
        ):
            raise ValueError("'server' is not an object {name, version}")
        if not isinstance(tools, list) or not all(_is_tool(t) for t in tools):
            raise ValueError("'tools' is not a list of {name, description, input_schema}")
        listed = tuple(
            ToolInfo(t["name"], t.get("description") or "", t["input_schema"]) for t in tools
        )
        locked = cls(
            name, dict(transport), server["name"], server["version"], str(raw.get("digest")), listed
        )
        if locked.digest != locked.info().digest():
            raise ValueError("'digest' is not the digest of its tools")
        return locked


def _is_tool(raw: object) -> bool:
    return (
        isinstance(raw, Mapping)
        and isinstance(raw.get("name"), str)
        and isinstance(raw.get("description", ""), str)
        and isinstance(raw.get("input_schema"), Mapping)
    )


def locked_server(spec: ToolServerSpec, info: ServerInfo) -> LockedServer:
    """The lock's record of `spec`, from what the started server said of itself."""
    return LockedServer(
        spec.name, transport_identity(spec), info.name, info.version, info.digest(), info.tools
    )


def lock_server(spec: ToolServerSpec, server: ToolServer) -> LockedServer:
    """Start `server` (its own start timeout bounds it), read its record and stop it,
    whatever happens; a `ToolFailure` when it does not start."""
    try:
        return locked_server(spec, server.start())
    finally:
        server.close()


class ToolListChanged(RunError):
    """A server's tool list is not the one locked: located at its declaration (CD267)."""

    diagnostic_code = codes.TOOL_LIST_CHANGED


class LockedToolServer:
    """The tools port of a locked server (see the module docstring). `relock` is the
    command that re-locks the pipeline, for the error's hint."""

    def __init__(
        self, inner: ToolServer, locked: LockedServer, spec: ToolServerSpec, relock: str
    ) -> None:
        self._inner = inner
        self._locked = locked
        self._spec = spec
        self._relock = relock
        self._live: ServerInfo | None = None
        self._starting = asyncio.Lock()

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def inner(self) -> ToolServer:
        return self._inner

    def start(self) -> ServerInfo:
        return self._locked.info()

    async def _checked(self) -> None:
        async with self._starting:
            if self._live is not None:
                return
            live = await asyncio.to_thread(self._inner.start)
            if live.digest() != self._locked.digest:
                raise ToolListChanged(
                    f"the tools of server {self._spec.name!r} "
                    f"changed since the lock: {_changes(self._locked.info(), live)}; "
                    "no call was made",
                    hint=f"{self._relock} (after checking the server's new tools)",
                    span=declared_at(self._spec),
                )
            self._live = live

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        await self._checked()
        return await self._inner.call(tool, arguments)

    def close(self) -> None:
        self._inner.close()


def declared_at(spec: ToolServerSpec) -> SourceSpan | None:
    """The server's name in `tools:` (None for a record not read from a document)."""
    if spec.source_map is None:
        return None
    return spec.source_map.key_span(spec.path)


def _changes(locked: ServerInfo, live: ServerInfo) -> str:
    """What differs between two tool lists, in words."""
    before = {t.name: t.input_schema for t in locked.tools}
    after = {t.name: t.input_schema for t in live.tools}
    parts = [f"{name!r} added" for name in sorted(set(after) - set(before))]
    parts += [f"{name!r} removed" for name in sorted(set(before) - set(after))]
    parts += [
        f"the input schema of {name!r} differs"
        for name in sorted(set(before) & set(after))
        if before[name] != after[name]
    ]
    return ", ".join(parts) or "the tool list differs"
