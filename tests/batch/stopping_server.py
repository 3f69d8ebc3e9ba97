"""An MCP server built with the `mcp` SDK's FastMCP that writes down how it ends.

Run as `python stopping_server.py MARKER [LINGER_S]` over stdio. It appends its process
id to `MARKER.starts` when it starts and to `MARKER.stopped` when it is asked to stop
(SIGTERM, as a pipeline closing its tool servers stops them), then ends LINGER_S seconds
later (at once by default); killed (SIGKILL, as the parent-death signal does), it writes
nothing. Its tool `echo(text)` answers the text;
`echo_after(text, seconds)` appends its process id to `MARKER.calls`, then
answers the text after `seconds`.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from mcp.server.fastmcp import FastMCP

MARKER = sys.argv[1]
LINGER_S = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
server = FastMCP("stopping", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Answer the text."""
    return text


@server.tool()
def echo_after(text: str, seconds: float) -> str:
    """Write down the call, then answer the text after `seconds`."""
    with Path(MARKER + ".calls").open("a", encoding="utf-8") as calls:
        calls.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return text


def _stopped(signum: int, frame: FrameType | None) -> None:
    with Path(MARKER + ".stopped").open("a", encoding="utf-8") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(LINGER_S)
    os._exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _stopped)
    with Path(MARKER + ".starts").open("a", encoding="utf-8") as starts:
        starts.write(f"{os.getpid()}\n")
    server.run("stdio")
