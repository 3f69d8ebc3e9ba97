"""The manifest's tool-server records: one `tools.<name>` entry each, stdio or HTTP.

`tool_server_spec` converts one schema-checked mapping and checks nothing (the
schema guarantees the shapes; validate's tool checks add what it cannot:
docs/architecture.md §4). A limit not written is None; `converge_dsl.tools`
holds the defaults. `tool_reference` reads an agent's `mcp:SERVER/TOOL` name (or
`mcp:PACK/SERVER/TOOL`, a pack's server: `pack_server`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from converge_dsl.diagnostics import JsonPath
from converge_dsl.frontend._located import Located, Number
from converge_dsl.frontend.document import SourceMap

MCP_PREFIX = "mcp:"
EVERY_TOOL = "*"


class ToolServerSpec(Located):
    """A `tools.<name>` entry: an MCP server and what the pipeline may do with it.

    `allow` is the allow-list of its tool names; `start_timeout_s`,
    `call_timeout_s` and `max_result_bytes` are None when not written.
    """

    __slots__ = ()
    name: str
    transport: str
    allow: tuple[str, ...]
    start_timeout_s: Number | None
    call_timeout_s: Number | None
    max_result_bytes: int | None


class StdioServerSpec(ToolServerSpec):
    """A server run as a child process: `command` (program and arguments, no shell),
    `env_pass` (variables copied from the parent), `env_set` (literal values) and
    `cwd` (relative to the pipeline's folder; None: that folder)."""

    _fields = (
        "name",
        "transport",
        "command",
        "env_pass",
        "env_set",
        "cwd",
        "allow",
        "start_timeout_s",
        "call_timeout_s",
        "max_result_bytes",
        "path",
        "source_map",
    )
    __slots__ = _fields

    def __init__(
        self,
        *,
        name: str,
        command: tuple[str, ...],
        env_pass: tuple[str, ...] = (),
        env_set: Mapping[str, str] = MappingProxyType({}),
        cwd: str | None = None,
        allow: tuple[str, ...],
        start_timeout_s: Number | None = None,
        call_timeout_s: Number | None = None,
        max_result_bytes: int | None = None,
        path: JsonPath = (),
        source_map: SourceMap | None = None,
    ) -> None:
        self.name = name
        self.transport = "stdio"
        self.command = command
        self.env_pass = env_pass
        self.env_set = env_set
        self.cwd = cwd
        self.allow = allow
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.max_result_bytes = max_result_bytes
        self.path = path
        self.source_map = source_map


class HttpServerSpec(ToolServerSpec):
    """A server reached over streamable HTTP at `url`; `hosts` the hosts it may reach;
    `headers` maps a header name to the environment variable holding its value."""

    _fields = (
        "name",
        "transport",
        "url",
        "hosts",
        "headers",
        "allow",
        "start_timeout_s",
        "call_timeout_s",
        "max_result_bytes",
        "path",
        "source_map",
    )
    __slots__ = _fields

    def __init__(
        self,
        *,
        name: str,
        url: str,
        hosts: tuple[str, ...],
        headers: Mapping[str, str] = MappingProxyType({}),
        allow: tuple[str, ...],
        start_timeout_s: Number | None = None,
        call_timeout_s: Number | None = None,
        max_result_bytes: int | None = None,
        path: JsonPath = (),
        source_map: SourceMap | None = None,
    ) -> None:
        self.name = name
        self.transport = "http"
        self.url = url
        self.hosts = hosts
        self.headers = headers
        self.allow = allow
        self.start_timeout_s = start_timeout_s
        self.call_timeout_s = call_timeout_s
        self.max_result_bytes = max_result_bytes
        self.path = path
        self.source_map = source_map

    @property
    def host(self) -> str:
        """The url's host name (lower case; empty when it has none)."""
        return (urlsplit(self.url).hostname or "").lower()


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _texts(value: object) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        return MappingProxyType({})
    return MappingProxyType({str(k): str(v) for k, v in value.items()})


def tool_server_spec(
    name: str, raw: Mapping[str, Any], path: JsonPath = (), source_map: SourceMap | None = None
) -> ToolServerSpec:
    """The typed record of one schema-checked `tools.<name>` entry; converts, checks nothing."""
    limits: dict[str, Any] = {
        "allow": _strings(raw.get("allow")),
        "start_timeout_s": raw.get("start_timeout_s"),
        "call_timeout_s": raw.get("call_timeout_s"),
        "max_result_bytes": raw.get("max_result_bytes"),
        "path": path,
        "source_map": source_map,
    }
    if "url" in raw:
        return HttpServerSpec(
            name=name,
            url=str(raw["url"]),
            hosts=_strings(raw.get("hosts")),
            headers=_texts(raw.get("headers")),
            **limits,
        )
    env: Mapping[str, Any] = raw.get("env") or {}
    cwd = raw.get("cwd")
    return StdioServerSpec(
        name=name,
        command=_strings(raw.get("command")),
        env_pass=_strings(env.get("pass")),
        env_set=_texts(env.get("set")),
        cwd=None if cwd is None else str(cwd),
        **limits,
    )


def tool_reference(name: str) -> tuple[str, str] | None:
    """(server, tool) of an agent's `mcp:SERVER/TOOL` tool name (tool `*`: every allowed
    tool); None for a built-in tool name. A pack's server is `mcp:PACK/SERVER/TOOL`: its
    server is then `PACK/SERVER` (`pack_server`), the name a run knows it by."""
    if not name.startswith(MCP_PREFIX) or "/" not in name:
        return None
    server, _, tool = name[len(MCP_PREFIX) :].rpartition("/")
    return server, tool


def pack_server(server: str) -> tuple[str, str] | None:
    """(pack, server) of a pack's server name `PACK/SERVER`; None for a pipeline's own."""
    pack, slash, name = server.partition("/")
    return (pack, name) if slash else None
