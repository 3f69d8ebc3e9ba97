"""The MCP servers of the tools tests: records for them, and a streamable HTTP one run
from the test on 127.0.0.1 (a free port; always stopped)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from converge_dsl.frontend import HttpServerSpec, StdioServerSpec

FIXTURE = Path(__file__).resolve().parent / "fastmcp_server.py"
FIXTURE_TOOLS = ("echo", "hang", "crash", "fail", "big", "getenv", "spawn", "linger")


def stdio_fixture(
    *, marker: Path | None = None, env_pass: tuple[str, ...] = (), **limits: float
) -> StdioServerSpec:
    command = (sys.executable, str(FIXTURE), "stdio", "0", *([str(marker)] if marker else []))
    return StdioServerSpec(
        name="fixture",
        command=command,
        env_pass=env_pass,
        allow=FIXTURE_TOOLS,
        **limits,  # type: ignore[arg-type]
    )


def time_server() -> StdioServerSpec:
    return StdioServerSpec(
        name="time",
        # the interpreter running the tests, not PATH's `mcp-server-time` (the tests' PATH
        # is PARENT's, taken when they are collected)
        command=(sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"),
        allow=("convert_time",),
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def http_fixture(**limits: float) -> Iterator[HttpServerSpec]:
    """The fixture server over streamable HTTP, started here and always stopped."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(FIXTURE), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("the HTTP fixture server exited") from None
                time.sleep(0.1)
        else:
            raise RuntimeError("the HTTP fixture server did not listen within 20 s")
        yield HttpServerSpec(
            name="web",
            url=f"http://127.0.0.1:{port}/mcp",
            hosts=("127.0.0.1",),
            allow=FIXTURE_TOOLS,
            **limits,  # type: ignore[arg-type]
        )
    finally:
        process.kill()
        process.wait(10)
