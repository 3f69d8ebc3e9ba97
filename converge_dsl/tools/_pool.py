"""`ServerPool`: the MCP tool servers of many runs of one pipeline, started once.

A batch worker runs many cases of one pipeline; starting each stdio server per
case would cost a process start and a handshake per case. The pool starts a
server on the first run's first use and lends it to every later run
(`lend` is a `ServerFactory`): a run's `RunTools` closing its servers at the
end closes only the loan. A server a loan saw fail (it could not start, a call
timed out or was cancelled at the run's deadline, the server went away) is
stopped and dropped when that loan closes, so the next run starts a fresh one.
`close()` stops every pooled server (the worker ends). Thread-safe: runs on
several threads or event loops share one pool (a server's calls go through
its own loop, `McpToolServer`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from pathlib import Path

from converge_dsl import codes
from converge_dsl._json_types import JsonObject
from converge_dsl.frontend import ToolServerSpec
from converge_dsl.tools._port import (
    ServerFactory,
    ServerInfo,
    ToolFailure,
    ToolResult,
    ToolServer,
)
from converge_dsl.tools._real import real_server


class ServerPool:
    """Servers by name, each started once and lent to every run (see the module docstring).

    `factory` makes a server the first time it is needed (the real one by default).
    """

    def __init__(self, factory: ServerFactory = real_server) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._starting: dict[str, threading.Lock] = {}
        self._servers: dict[str, tuple[ToolServer, ServerInfo]] = {}
        self.starts = 0  # how many servers the pool has started (for tests and benchmarks)

    def lend(self, spec: ToolServerSpec, base_dir: Path, environ: Mapping[str, str]) -> ToolServer:
        """A loan of `spec`'s pooled server (a `ServerFactory`): started on its first use."""
        return _Loan(self, spec, base_dir, environ)

    def started(
        self, spec: ToolServerSpec, base_dir: Path, environ: Mapping[str, str]
    ) -> tuple[ToolServer, ServerInfo]:
        """The pooled server of `spec` and its info, started now if none is pooled."""
        with self._lock:
            starting = self._starting.setdefault(spec.name, threading.Lock())
        with starting:
            pooled = self._servers.get(spec.name)
            if pooled is not None:
                return pooled
            server = self._factory(spec, base_dir, environ)
            self.starts += 1
            info = server.start()  # a failure is the caller's; nothing is pooled
            self._servers[spec.name] = (server, info)
            return server, info

    def discard(self, server: ToolServer) -> None:
        """Stop `server` and drop it from the pool (the next run starts another)."""
        with self._lock:
            if self._servers.get(server.name, (None,))[0] is server:
                del self._servers[server.name]
        server.close()

    def close(self) -> None:
        """Stop every pooled server; the pool can start them again afterwards."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server, _ in servers:
            server.close()


class _Loan:
    """One run's use of a pooled server: closing it keeps the server, unless it failed."""

    def __init__(
        self, pool: ServerPool, spec: ToolServerSpec, base_dir: Path, environ: Mapping[str, str]
    ) -> None:
        self._pool = pool
        self._spec = spec
        self._base_dir = base_dir
        self._environ = environ
        self._server: ToolServer | None = None
        self._failed = False

    @property
    def name(self) -> str:
        return self._spec.name

    def start(self) -> ServerInfo:
        self._server, info = self._pool.started(self._spec, self._base_dir, self._environ)
        return info

    async def call(self, tool: str, arguments: JsonObject) -> ToolResult:
        if self._server is None:
            raise ToolFailure(
                codes.TOOL_SERVER_GONE, self.name, f"tool server {self.name!r} is not running"
            )
        try:
            return await self._server.call(tool, arguments)
        except (ToolFailure, asyncio.CancelledError, TimeoutError):
            self._failed = True  # timed out, cut at the deadline, or gone: not lent again
            raise

    def close(self) -> None:
        server, self._server = self._server, None
        if server is not None and self._failed:
            self._pool.discard(server)
