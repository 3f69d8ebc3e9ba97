"""An MCP server built with the `mcp` SDK's FastMCP that counts the calls it answers.

Run as `python counting_server.py COUNT_FILE [EXTRA_MARKER]` over stdio. Its tool
`lookup(word)` appends one line to COUNT_FILE per call (so a test knows how many
calls reached it) and answers the word's length as JSON. With the file named by
EXTRA_MARKER present, it also offers `extra` (a changed tool list).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.fastmcp import FastMCP

COUNT = Path(sys.argv[1])
server = FastMCP("counting", log_level="WARNING")


@server.tool()
def lookup(word: str) -> str:
    """The word and its length, as JSON."""
    with COUNT.open("a", encoding="utf-8") as out:
        out.write(word + "\n")
    return json.dumps([{"word": word, "length": len(word)}])


if len(sys.argv) > 2 and Path(sys.argv[2]).exists():

    @server.tool()
    def extra(text: str) -> str:
        """A tool that appears after the lock."""
        return text


if __name__ == "__main__":
    server.run("stdio")
