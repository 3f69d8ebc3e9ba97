"""MCP tool servers: the tools port, its adapter on the `mcp` SDK and a fake one.

Public surface:
- the port: `ToolServer` (start -> `ServerInfo` with its `ToolInfo`s, async call ->
  `ToolResult`, close), `ToolFailure` (a server that did not start, timed out or went
  away; codes CD963-CD966), `ServerLimits` (a server's timeouts and result cap, with
  their defaults), `cap_result` (a result cut at the cap, marked)
- adapters: `McpToolServer` (the `mcp` SDK over stdio, in a process group of its own
  with an environment built from nothing, or streamable HTTP to declared hosts);
  `FakeToolServer` with its `FakeTool`s (Python functions, for tests); `real_server`,
  the `ServerFactory` of real servers, what every caller that makes one uses by default
- the lock: `LockedServer` (a server as `converge-dsl lock` pins it: transport identity,
  name and version, tool-list digest and tools), `locked_server(spec, info)` (that record
  of a started server), `lock_server` (start, read, stop),
  `LockedToolServer` (a run held to the pin: `ToolListChanged`, CD267),
  `transport_identity(spec)`
- `child_environment(spec, parent)`, the whole environment of a stdio server's child;
  `server_secrets(spec, parent)`, the values a run hands a server (redacted everywhere)
- cassettes: `recording(factory, cassette, steps)` wraps each server in a
  `RecordingToolServer` (`--record`); `ToolReplay.from_file(cassette, order=...)`
  stands in for them (`ToolReplay.server` is a `ServerFactory`, its servers are
  `ReplayToolServer`s; a call it lacks is `ToolReplayMiss`, CD968)
- `ServerPool`: servers started once and lent to many runs (a batch worker's), a
  server that failed dropped and started afresh; `close()` stops them
- `RunTools`: the servers of one run as agents list and call them (started on first use,
  arguments checked against the server's input schema, `budget.max_tool_calls`, results
  redacted, failures as error text, each call a `McpToolCalled` trace event; `close()`
  stops them all); `tool_name(server, tool)`; `ServerFactory`, how a run makes a server

The module `converge_dsl.tools.caching` (imported by itself) puts a server behind
the run's answer cache (docs/cache.md).

The `mcp` SDK (the `mcp` extra) is imported only when a real server starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from converge_dsl._lazy import lazy_exports

if TYPE_CHECKING:  # the table's modules, for type checkers
    from converge_dsl.tools._cassette import *  # noqa: F403
    from converge_dsl.tools._environment import *  # noqa: F403
    from converge_dsl.tools._events import *  # noqa: F403
    from converge_dsl.tools._fake import *  # noqa: F403
    from converge_dsl.tools._locked import *  # noqa: F403
    from converge_dsl.tools._mcp import *  # noqa: F403
    from converge_dsl.tools._pool import *  # noqa: F403
    from converge_dsl.tools._port import *  # noqa: F403
    from converge_dsl.tools._real import *  # noqa: F403
    from converge_dsl.tools._run import *  # noqa: F403
else:
    __all__, __getattr__ = lazy_exports(
        __name__,
        {
            "converge_dsl.tools._cassette": (
                "RecordingToolServer",
                "ReplayToolServer",
                "ToolReplay",
                "ToolReplayMiss",
                "recording",
            ),
            "converge_dsl.tools._environment": ("child_environment", "server_secrets"),
            "converge_dsl.tools._events": ("McpToolCalled",),
            "converge_dsl.tools._fake": ("FakeTool", "FakeToolServer"),
            "converge_dsl.tools._locked": (
                "LockedServer",
                "LockedToolServer",
                "ToolListChanged",
                "lock_server",
                "locked_server",
                "transport_identity",
            ),
            "converge_dsl.tools._mcp": ("McpToolServer",),
            "converge_dsl.tools._pool": ("ServerPool",),
            "converge_dsl.tools._real": ("real_server",),
            "converge_dsl.tools._port": (
                "ServerFactory",
                "ServerInfo",
                "ServerLimits",
                "ToolFailure",
                "ToolInfo",
                "ToolResult",
                "ToolServer",
                "cap_result",
            ),
            "converge_dsl.tools._run": ("RunTools", "ServerFactory", "tool_name"),
        },
    )
