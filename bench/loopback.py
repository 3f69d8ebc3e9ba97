"""A minimal OpenAI-compatible chat server on 127.0.0.1 that answers after a fixed latency.

Run as its own process (`python bench/loopback.py LATENCY_S`) so that its CPU
is not the measured client's: it prints `port N` once it listens, then serves
`POST .../chat/completions` with keep-alive, any number of connections at
once (backlog 4096), each answer `{"choices": [{"message": {"content": "ok"}}]}`
with a usage count, sent LATENCY_S after the request was read. It exits when
its standard input closes. `bench/peers.py` uses one such server for both
engines.
"""

from __future__ import annotations

import asyncio
import json
import sys

_BODY = json.dumps(
    {
        "id": "bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).encode()
_RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(_BODY)}\r\n\r\n".encode()
    + _BODY
)


async def _serve(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length:
                await reader.readexactly(length)
            await asyncio.sleep(latency)
            writer.write(_RESPONSE)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(latency: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve(r, w, latency), "127.0.0.1", 0, backlog=4096
    )
    port = server.sockets[0].getsockname()[1]
    print(f"port {port}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin
    server.close()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]) if len(sys.argv) > 1 else 0.1))
