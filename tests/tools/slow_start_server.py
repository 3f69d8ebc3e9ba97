"""An MCP server over stdio that is slow to start (`python slow_start_server.py MARKER`,
`MARKER` only to find its process): it sleeps a minute before reading anything, so it
never answers within a run's time."""

from __future__ import annotations

import time

if __name__ == "__main__":
    time.sleep(60)
