"""Model adapter benchmark: concurrency over one shared client, and SSE parse throughput.

Runs against the loopback fake provider (converge_dsl.models.fakeserver):
- 50 concurrent calls, each answered after 100 ms; the figure is the ratio of
  their wall time to one call's latency (50 sequential calls would be ~50).
- a 20,000-chunk SSE stream, parsed in memory and end to end over loopback.
The server runs in its own process, as a real one would: in-process, its
threads would compete with the client's event loop for the GIL.
Usage: python bench/models.py   (last line: `concurrent wall / single latency: X`)
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

from converge_dsl.clock import SystemClock
from converge_dsl.models import Message, Model, ModelRequest, build_model
from converge_dsl.models._openai import OpenAIWire
from converge_dsl.models._sse import SseDecoder
from converge_dsl.models._wire import ToolNames
from converge_dsl.models.fakeserver import FakeProviderServer, FakeReply, openai_events

CONCURRENT = 50
LATENCY_S = 0.1
CHUNKS = 20_000


def _serve(default: FakeReply, channel: Connection) -> None:
    with FakeProviderServer() as server:
        server.reset(default)
        channel.send(server.openai_base_url)
        channel.recv()  # any message (or the parent closing the pipe) stops the server


@contextmanager
def server_process(default: FakeReply) -> Iterator[str]:
    """A fake provider in a child process answering `default`; yields its OpenAI base URL."""
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_serve, args=(default, child), daemon=True)
    process.start()
    try:
        yield str(parent.recv())
    finally:
        parent.send("stop")
        process.join(10)


def model_for(base_url: str) -> Model:
    config = {
        "adapter": "openai",
        "base_url": base_url,
        "model": "bench",
        "accounts": [{"name": "bench", "api_key_env": "BENCH_KEY"}],
        "retries": 0,
    }
    return build_model(
        "bench",
        config,
        base_dir=Path("."),
        env={"BENCH_KEY": "bench-key"},
        clock=SystemClock(),
        rng=random.Random(0),
    )


def request(index: int) -> ModelRequest:
    return ModelRequest("bench", (Message.text("user", f"question {index}"),))


async def concurrency(base_url: str) -> tuple[float, float, float]:
    """Single latency, then the wall of 50 concurrent calls: cold (new connections), warm."""
    model = model_for(base_url)
    try:
        await model.call(request(-1))  # warm-up: open the first connection
        singles = []
        for index in range(5):
            start = time.perf_counter()
            await model.call(request(index))
            singles.append(time.perf_counter() - start)
        single = statistics.median(singles)
        walls = []
        for _ in range(2):
            start = time.perf_counter()
            results = await asyncio.gather(*(model.call(request(i)) for i in range(CONCURRENT)))
            walls.append(time.perf_counter() - start)
            assert all(r.text == "answer" for r in results)
        return single, walls[0], walls[1]
    finally:
        await model.aclose()


def parse_in_memory() -> float:
    reply = FakeReply(text="x" * CHUNKS, chunks=CHUNKS)
    lines = b"".join(openai_events(reply)).decode().split("\n")
    start = time.perf_counter()
    decoder = SseDecoder()
    assembler = OpenAIWire().assembler(ToolNames(()), lambda _: None, lambda _: None)
    for line in lines:
        event = decoder.feed_line(line)
        if event is not None:
            assembler.feed(event)
    answer = assembler.finish()
    elapsed = time.perf_counter() - start
    assert len(answer.message.text_content) == CHUNKS
    return CHUNKS / elapsed


async def parse_over_loopback(base_url: str) -> float:
    model = model_for(base_url)
    count = 0

    def seen(_: str) -> None:
        nonlocal count
        count += 1

    try:
        start = time.perf_counter()
        result = await model.call_streaming(request(0), seen)
        elapsed = time.perf_counter() - start
    finally:
        await model.aclose()
    assert count == CHUNKS
    assert len(result.text) == CHUNKS
    return CHUNKS / elapsed


def main() -> None:
    memory = parse_in_memory()
    with server_process(FakeReply(text="x" * CHUNKS, chunks=CHUNKS)) as base_url:
        loopback = asyncio.run(parse_over_loopback(base_url))
    with server_process(FakeReply(text="answer", delay_s=LATENCY_S)) as base_url:
        single, cold, warm = asyncio.run(concurrency(base_url))
    print(f"SSE parse throughput, in memory ({CHUNKS} chunks): {memory:,.0f} chunks/s")
    print(f"SSE parse throughput, over loopback ({CHUNKS} chunks): {loopback:,.0f} chunks/s")
    print(f"single call latency: {single * 1000:.1f} ms (server latency {LATENCY_S * 1000:.0f} ms)")
    print(
        f"{CONCURRENT} concurrent calls wall, new connections: {cold * 1000:.1f} ms "
        f"(ratio {cold / single:.2f})"
    )
    print(f"{CONCURRENT} concurrent calls wall, kept-alive pool: {warm * 1000:.1f} ms")
    print(f"concurrent wall / single latency: {warm / single:.2f}")


if __name__ == "__main__":
    main()
