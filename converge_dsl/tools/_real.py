"""`real_server`: the `ServerFactory` of real MCP servers, the one default wherever a tool
server is made (a run's tools, the batch pool, `lock`, a test file's servers without a
cassette); no other module names the adapter. The `mcp` SDK is imported on first use."""

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
