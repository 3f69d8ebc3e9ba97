"""An MCP server built with the `mcp` SDK's own FastMCP, for the tools tests.

Run as a program: `python fastmcp_server.py stdio` or `python fastmcp_server.py
http PORT` (streamable HTTP on 127.0.0.1). Its tools echo, hang, crash the
server, fail, answer N megabytes, read a variable of its environment, start
a grandchild process (to show the process group is killed), and outlive the end
of its stdin (`linger`). With the file
named by its third argument present, it also offers `extra` (a changed tool list).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from mcp.server.fastmcp import FastMCP

PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 0
server = FastMCP("fixture", host="127.0.0.1", port=PORT or 8000, log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Answer the text."""
    return text


@server.tool()
def hang(seconds: float = 300.0) -> str:
    """Sleep (long by default)."""
    time.sleep(seconds)
    return "woke"


@server.tool()
def crash() -> str:
    """End the server's process."""
    os._exit(3)


@server.tool()
def fail(reason: str) -> str:
    """Raise an error (the tool's error result)."""
    raise ValueError(reason)


@server.tool()
def big(megabytes: int) -> str:
    """Answer `megabytes` MB of text."""
    return "x" * (megabytes * 1_000_000)


@server.tool()
def getenv(name: str) -> str:
    """The value of a variable of the server's environment, or '<unset>'."""
    return os.environ.get(name, "<unset>")


@server.tool()
def spawn() -> str:
    """Start a grandchild that sleeps; answer its process id."""
    child = subprocess.Popen(["sleep", "300"])
    return str(child.pid)


@server.tool()
def linger(seconds: float = 300.0) -> str:
    """Keep the process alive for `seconds` even after its stdin closes (a thread that is
    not a daemon), as a server that ignores the end of its input does."""
    threading.Thread(target=time.sleep, args=(seconds,)).start()
    if len(sys.argv) > 3:
        Path(sys.argv[3] + ".lingering").touch()  # a test waits for it
    return "lingering"


if len(sys.argv) > 3 and Path(sys.argv[3]).exists():

    @server.tool()
    def extra(text: str) -> str:
        """A tool that appears after the lock."""
        return text


if len(sys.argv) > 3:  # each start leaves a line (a test counts the starts)
    with open(sys.argv[3] + ".starts", "a", encoding="utf-8") as starts:
        starts.write(f"{os.getpid()}\n")


if __name__ == "__main__":
    server.run("stdio" if sys.argv[1] == "stdio" else "streamable-http")
