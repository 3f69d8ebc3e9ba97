"""MCP benchmark: a run as an MCP tool call (`serve --mcp`) against the same run over HTTP.

One `converge-dsl serve --mcp` process on 127.0.0.1 (a fresh state folder, a
bearer token, `--workers` = the concurrency) serves pipelines/market-entry.yaml
(two scripted model calls, four cycles). Two clients take turns, `--rounds`
times each, every turn `--calls` runs at `--concurrency` at once:

- baseline: `POST /v1/pipelines/market-entry/runs?wait=true` with httpx;
- mcp: `tools/call market-entry` through the `mcp` SDK's client
  (`streamable_http_client` + `ClientSession`, one session per concurrent caller).

Every answer must be a finished run (else the benchmark fails). For each side:
calls per second, p50 / p99 latency, and the server's CPU per call (its threads
together, from /proc, which a machine loaded by others disturbs less than the
rates), and this process's CPU per call (the client's: the SDK's client checks
every answer against the tool's output schema); then the ratios mcp / baseline.
The load average is printed first.

Prints:

    load average L
    http c=C: calls/s R  p50 A ms  p99 B ms  server cpu/call X ms  client cpu/call K ms
    mcp  c=C: calls/s R  p50 A ms  p99 B ms  server cpu/call Y ms  client cpu/call M ms
    mcp / http: time per call T  server cpu per call U

Usage: python bench/serve_mcp.py [--calls N] [--concurrency N] [--rounds N].
Needs the `serve` and `mcp` extras.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from serve import _cpu_s, _stop  # bench/serve.py: the script's folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "market-entry.yaml"
TOKEN = "bench-token-0123456789abcdef"
HEADERS = {"Authorization": f"Bearer {TOKEN}"}
INPUTS = {"market": "Baltic 3PL"}
TIMEOUT_S = 120.0


def _start(state: Path, tokens: Path, concurrency: int) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "converge_dsl",
            "serve",
            str(PIPELINE),
            "--mcp",
            "--port",
            "0",
            "--state",
            str(state),
            "--token-file",
            str(tokens),
            "--workers",
            str(concurrency),
            "--queue",
            str(concurrency * 4),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if " on http://" in line:
            return process, line.rsplit(" on ", 1)[1].strip()
        if not line and process.poll() is not None:
            break
    process.kill()
    raise SystemExit("the server did not start")


async def _timed(
    calls: int, concurrency: int, caller: Callable[[], Awaitable[Callable[[], Awaitable[None]]]]
) -> list[float]:
    """Latencies (s) of `calls` calls, `concurrency` callers at once."""
    latencies: list[float] = []
    per = calls // concurrency

    async def worker() -> None:
        call = await caller()
        for _ in range(per):
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def _http_round(url: str, calls: int, concurrency: int) -> list[float]:
    async with httpx.AsyncClient(
        base_url=url,
        headers=HEADERS,
        timeout=TIMEOUT_S,
        limits=httpx.Limits(max_connections=concurrency),
    ) as http:

        async def caller() -> Callable[[], Awaitable[None]]:
            async def call() -> None:
                answer = await http.post(
                    "/v1/pipelines/market-entry/runs?wait=true", json={"inputs": INPUTS}
                )
                if answer.status_code != 200 or answer.json()["status"] != "done":
                    raise SystemExit(f"http: {answer.status_code} {answer.text[:200]}")

            return call

        return await _timed(calls, concurrency, caller)


async def _mcp_round(url: str, calls: int, concurrency: int) -> list[float]:
    latencies: list[float] = []
    per = calls // concurrency

    async def worker() -> None:
        async with (
            httpx.AsyncClient(headers=HEADERS, timeout=TIMEOUT_S) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.list_tools()  # the client checks answers against the output schema
            for _ in range(per):
                started = time.perf_counter()
                result = await session.call_tool("market-entry", INPUTS)
                latencies.append(time.perf_counter() - started)
                run = result.structuredContent or {}
                if result.isError or run.get("status") != "done":
                    raise SystemExit(f"mcp: {result.content[:1]}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


@dataclass
class Side:
    """One client's turns: its round, and what they took together."""

    round: Callable[[str, int, int], Coroutine[Any, Any, list[float]]]
    latencies: list[float] = field(default_factory=list)
    wall: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0

    def per_call(self, total: float) -> float:
        return total / len(self.latencies)

    def line(self, name: str) -> str:
        ordered = sorted(self.latencies)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return (
            f"{name}: calls/s {len(ordered) / self.wall:.0f}  "
            f"p50 {statistics.median(ordered) * 1000:.1f} ms  p99 {p99 * 1000:.1f} ms  "
            f"server cpu/call {self.per_call(self.server_cpu) * 1000:.2f} ms  "
            f"client cpu/call {self.per_call(self.client_cpu) * 1000:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    folder = Path(tempfile.mkdtemp(prefix="converge-bench-mcp-"))
    tokens = folder / "tokens"
    tokens.write_text(TOKEN + "\n")
    process, url = _start(folder / "state", tokens, args.concurrency)
    sides = {"http": Side(_http_round), "mcp": Side(_mcp_round)}
    try:
        asyncio.run(_http_round(url, args.concurrency, args.concurrency))  # warm up
        asyncio.run(_mcp_round(url, args.concurrency, args.concurrency))
        for _ in range(args.rounds):
            for side in sides.values():
                server, client, wall = _cpu_s(process.pid), time.process_time(), time.perf_counter()
                side.latencies += asyncio.run(side.round(url, args.calls, args.concurrency))
                side.wall += time.perf_counter() - wall
                side.client_cpu += time.process_time() - client
                side.server_cpu += _cpu_s(process.pid) - server
    finally:
        _stop(process)
        shutil.rmtree(folder, ignore_errors=True)
    for name, side in sides.items():
        print(side.line(f"{name:4} c={args.concurrency}"))
    http, mcp = sides["http"], sides["mcp"]
    time_ratio = mcp.per_call(mcp.wall) / http.per_call(http.wall)
    cpu_ratio = mcp.per_call(mcp.server_cpu) / http.per_call(http.server_cpu)
    print(f"mcp / http: time per call {time_ratio:.2f}  server cpu per call {cpu_ratio:.2f}")


if __name__ == "__main__":
    main()
