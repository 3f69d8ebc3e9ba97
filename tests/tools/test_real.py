"""`real_server` is the one default factory of real tool servers: it makes an
`McpToolServer`, not started, and no module outside the tools package names the adapter
(each would be a second default to keep in step)."""

from __future__ import annotations

import re
from pathlib import Path

from converge_dsl.tools import McpToolServer, real_server

from ._servers import stdio_fixture

PACKAGE = Path(__file__).resolve().parents[2] / "converge_dsl"
ADAPTER = re.compile(r"\bMcpToolServer\b")
ITS_OWN = {
    "tools/_mcp.py",
    "tools/_real.py",
    "tools/__init__.py",
    "tools/_port.py",
    "tools/_pool.py",
}


def test_real_server_makes_an_mcp_server_without_starting_it(tmp_path: Path) -> None:
    server = real_server(stdio_fixture(), tmp_path, {})
    assert isinstance(server, McpToolServer)
    server.close()  # nothing was started: closing stops nothing and raises nothing


def _naming_the_adapter() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative not in ITS_OWN and ADAPTER.search(path.read_text(encoding="utf-8")):
            found.append(relative)
    return found


def test_no_module_outside_the_tools_package_defaults_to_the_adapter() -> None:
    assert _naming_the_adapter() == []


def test_the_adapter_check_can_fail() -> None:
    assert ADAPTER.search("        factory = McpToolServer\n")
    assert not ADAPTER.search("        factory = real_server\n")
