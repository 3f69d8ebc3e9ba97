"""Answer cache benchmark: a hit and the miss path, as ratios to an uncached loopback call.

A loopback OpenAI-compatible server (`bench/loopback.py`, its own process)
answers every request after 100 ms. In the same run this measures, with one
`openai` model built as a pipeline builds it:
- uncached: CALLS calls with distinct requests, straight to the model;
- miss path: CALLS other distinct requests through the answer cache (a fresh
  SQLite store in a temporary folder): look-up, miss, call, store;
- hit: the miss pass's requests again, HITS times over: look-up, check, decode.
Each figure is the median of its calls; the ratios are to the uncached call.
Targets (docs/cache.md): hit <= 0.02 of an uncached call; miss path <= 1.05.
Usage: python bench/cache.py
(last lines: `hit / uncached call: X`, `miss path / uncached call: Y`)
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from converge_dsl.clock import SystemClock
from converge_dsl.models import Message, Model, ModelRequest, build_model
from converge_dsl.models.answer_store import SqliteAnswerStore
from converge_dsl.models.caching import AnswerCache

ROOT = Path(__file__).resolve().parents[1]
LATENCY_S = 0.1
CALLS = 30
HITS = 5


def start_loopback() -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "loopback.py"), str(LATENCY_S)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    line = server.stdout.readline().split()
    assert line[:1] == ["port"], line
    return server, f"http://127.0.0.1:{line[1]}/v1"


def model(base_url: str) -> Model:
    return build_model(
        "remote",
        {"adapter": "openai", "base_url": base_url, "model": "bench", "retries": 0},
        base_dir=ROOT,
        env=dict(os.environ),
        clock=SystemClock(),
        rng=random.Random(0),
    )


def request(label: str, number: int) -> ModelRequest:
    text = f"{label} {number}: " + "a question of some length " * 20
    return ModelRequest("bench", (Message.text("user", text),), system=("Be brief.",))


async def timed(target: Model, requests: list[ModelRequest]) -> list[float]:
    took = []
    for req in requests:
        started = time.perf_counter()
        await target.call(req)
        took.append(time.perf_counter() - started)
    return took


async def measure(base_url: str, folder: Path) -> tuple[float, float, float]:
    plain = model(base_url)
    await plain.call(request("warm", 0))  # one connection made before timing
    uncached = await timed(plain, [request("plain", n) for n in range(CALLS)])
    await plain.aclose()
    answers = AnswerCache(SqliteAnswerStore(folder), clock=SystemClock())
    cached = answers.wrap("remote", model(base_url))
    await cached.call(request("warm", 1))
    missed = [request("cached", n) for n in range(CALLS)]
    miss = await timed(cached, missed)
    hit = await timed(cached, missed * HITS)
    await cached.aclose()
    assert answers.hits == len(missed) * HITS, answers.hits
    return statistics.median(uncached), statistics.median(miss), statistics.median(hit)


def main() -> None:
    server, base_url = start_loopback()
    try:
        with tempfile.TemporaryDirectory() as folder:
            uncached, miss, hit = asyncio.run(measure(base_url, Path(folder)))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    print(f"loopback latency {LATENCY_S * 1000:.0f} ms, {CALLS} calls per pass, median of each")
    print(f"uncached call: {uncached * 1000:.2f} ms")
    print(f"miss path (look-up, call, store): {miss * 1000:.2f} ms")
    print(f"hit (look-up, check, decode): {hit * 1000:.3f} ms")
    print(f"hit / uncached call: {hit / uncached:.4f} (target <= 0.02)")
    print(f"miss path / uncached call: {miss / uncached:.4f} (target <= 1.05)")


if __name__ == "__main__":
    main()
