"""A hand-written MCP server over stdio that misbehaves on purpose (`python raw_server.py
MODE`): it answers the handshake and `tools/list` (one tool, `echo`), then a call as
MODE says: `not-json` writes a line that is not JSON-RPC and never answers; `long-error`
answers with the tool's error, `long-rpc-error` with a JSON-RPC error, each of 50,000
characters. With `twice`, its tools/list names `echo` twice; with `hang`, a call never
ends; with `slow-list`, tools/list never ends. It prints a banner that is not JSON-RPC
before anything else, as some servers do."""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(mode: str) -> None:
    print("raw server: starting", flush=True)  # a banner, before any message
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        method = message.get("method")
        if method == "initialize":
            answer["result"] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
        elif method == "tools/list":
            if mode == "slow-list":
                time.sleep(60)
            tool = {"name": "echo", "inputSchema": {"type": "object"}}
            answer["result"] = {"tools": [tool, tool] if mode == "twice" else [tool]}
        elif method == "tools/call" and mode == "hang":
            time.sleep(60)
        elif method == "tools/call" and mode == "not-json":
            sys.stdout.write("{this is not JSON-RPC\n")
            sys.stdout.flush()
            time.sleep(60)
        elif method == "tools/call" and mode == "long-error":
            text = "no such ticket " * 3334
            answer["result"] = {"content": [{"type": "text", "text": text}], "isError": True}
        elif method == "tools/call" and mode == "long-rpc-error":
            answer["error"] = {"code": -32000, "message": "no such ticket " * 3334}
        else:
            answer["result"] = {"content": [{"type": "text", "text": "ok"}]}
        _send(answer)


if __name__ == "__main__":
    main(sys.argv[1])
