"""`real_server`: the `ServerFactory` of real MCP servers, the one the run's tools and the
batch pool use by default (the `mcp` SDK is imported on first use)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from converge_dsl.frontend import ToolServerSpec
    from converge_dsl.tools._port import ToolServer


def real_server(spec: ToolServerSpec, base_dir: Path, environ: Mapping[str, str]) -> ToolServer:
    """A real server of `spec` (`McpToolServer`), not started."""
    from converge_dsl.tools._mcp import McpToolServer

    return McpToolServer(spec, base_dir, environ)
