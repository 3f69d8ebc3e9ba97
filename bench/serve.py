"""Service benchmark: `converge-dsl serve` under a real load tool, against `Pipeline.arun`.

- Baseline: runs per second of `Pipeline.arun` in this process, `--concurrency`
  at once (default 50) on one event loop, over `--runs` runs.
- Service: `converge-dsl serve` in its own process on 127.0.0.1 (a fresh
  state folder, a bearer token, `--workers` = the concurrency), driven by
  `wrk` (Debian's package) for `--seconds` with `--concurrency` connections,
  each request `POST /v1/pipelines/NAME/runs?wait=true`: every answer is a
  finished run. wrk's own figures: requests per second, p50 and p99 latency,
  and its errors (non-2xx answers, socket errors).
- Overhead per run = baseline runs/s / service runs/s (target <= 1.3 at
  concurrency 50): what the HTTP layer, the SQLite state, the event store
  and the checkpoint journal add to one run.
- CPU per run, which a machine loaded by others disturbs less than the
  rates: the CPU time of this process over the timed `Pipeline.arun` runs,
  and the CPU time of the server process and its children (threads together,
  from /proc) over wrk's requests; their ratio is the CPU overhead per run.
  The load average is printed before each model.

Two models: `scripted` (pipelines/market-entry.yaml: two scripted model calls,
four cycles) and `loopback` (two model calls in a row through the openai
adapter to `bench/loopback.py`, its own process, answering after 100 ms).

Prints one line per model:

    serve MODEL c=50: req/s R  p50 A ms  p99 B ms  errors E  arun runs/s S  overhead per run: O
      cpu per run: serve X ms  arun Y ms  ratio Z

With `--executor process|ray` the server runs its runs on workers; the
service's CPU is then the server's and its worker processes' together.

Usage: python bench/serve.py [--model scripted|loopback|both] [--seconds S]
[--concurrency N] [--runs N] [--executor local|process|ray].
Needs `wrk` on PATH (`apt-get install wrk`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTED = ROOT / "pipelines" / "market-entry.yaml"
TOKEN = "bench-token-0123456789abcdef"
LOOPBACK_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: latency
inputs:
  topic: {{description: What to ask about, default: x}}
models:
  fake: {{adapter: openai, base_url: "http://127.0.0.1:{port}/v1", model: bench}}
suggestors:
  - name: first
    kind: llm
    model: fake
    target: hypotheses
    prompt: {{user: "first {{{{ inputs.topic }}}}"}}
    output: {{format: text, id: first}}
  - name: second
    kind: llm
    model: fake
    dependencies: [hypotheses]
    target: strategies
    prompt: {{user: "second"}}
    output: {{format: text, id: second}}
"""
WRK_SCRIPT = """\
wrk.method = "POST"
wrk.body = '{body}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {token}"
"""


def baseline(
    pipeline: Path, inputs: dict[str, str], runs: int, concurrency: int
) -> tuple[float, float]:
    """Runs per second of `Pipeline.arun`, `concurrency` at once, after a warm-up; and the
    CPU seconds per run of this process."""
    from converge_dsl import load

    loaded = load(pipeline)

    async def main() -> tuple[float, float]:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                result = await loaded.arun(inputs)
                assert result.stop_reason == "converged", result.stop_reason

        await asyncio.gather(*(one() for _ in range(min(runs, 2 * concurrency))))
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one() for _ in range(runs)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        await loaded.aclose()
        return runs / elapsed, cpu / runs

    return asyncio.run(main())


def _serve(
    pipeline: Path, folder: Path, concurrency: int, executor: str = "local"
) -> tuple[subprocess.Popen[str], str]:
    tokens = folder / "tokens"
    tokens.write_text(TOKEN + "\n")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "converge_dsl",
            "serve",
            str(pipeline),
            "--port",
            "0",
            "--state",
            str(folder / "state"),
            "--token-file",
            str(tokens),
            "--workers",
            str(concurrency),
            "--queue",
            str(100 * concurrency),
            "--executor",
            executor,
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "CONVERGE_DSL_CONFIG_DIR": str(folder / "config")},
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # "serving 1 pipeline(s) on URL", bounded by the server
    if " on http://" not in line:
        process.kill()
        raise SystemExit(f"the server did not start: {line}{process.stderr.read()}")
    return process, line.rsplit(" on ", 1)[1].strip()


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, every thread) the process `pid` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _family_cpu_s(pid: int) -> float:
    """CPU seconds of process `pid` and of its children (`--executor process`: the
    worker processes, whose CPU is the service's too)."""
    total = _cpu_s(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    total += _cpu_s(int(entry.name))
            except (OSError, ValueError):
                continue  # ended meanwhile
    return total


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def drive(
    url: str, name: str, body: str, *, seconds: int, concurrency: int, folder: Path
) -> dict[str, float]:
    """wrk's figures for `seconds` of `?wait=true` runs at `concurrency` connections."""
    script = folder / "post.lua"
    script.write_text(WRK_SCRIPT.format(body=body, token=TOKEN))
    done = subprocess.run(
        [
            "wrk",
            "-t",
            "1",
            "-c",
            str(concurrency),
            "-d",
            f"{seconds}s",
            "--timeout",
            "30s",
            "--latency",
            "-s",
            str(script),
            f"{url}/v1/pipelines/{name}/runs?wait=true",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    out = done.stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = int(non2xx.group(1)) if non2xx else 0
    errors += sum(int(n) for n in socket.groups()) if socket else 0
    return {"rate": rate, "p50": p50, "p99": p99, "errors": errors, "requests": requests}


def bench(model: str, seconds: int, concurrency: int, runs: int, executor: str = "local") -> None:
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        folder = Path(tmp)
        os.environ["CONVERGE_DSL_CONFIG_DIR"] = str(folder / "config")
        loopback = None
        if model == "loopback":
            loopback = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "loopback.py"), "0.1"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert loopback.stdout is not None
            port = loopback.stdout.readline().split()[1]
            pipeline = folder / "latency.yaml"
            pipeline.write_text(LOOPBACK_PIPELINE.format(port=port))
            name, inputs = "latency", {"topic": "bench"}
        else:
            pipeline, name, inputs = SCRIPTED, "market-entry", {"market": "Baltic 3PL"}
        try:
            print(f"load average {os.getloadavg()}", flush=True)
            arun, arun_cpu = baseline(pipeline, inputs, runs, concurrency)
            server, url = _serve(pipeline, folder, concurrency, executor)
            try:
                body = json.dumps({"inputs": inputs})
                cpu = _family_cpu_s(server.pid)
                figures = drive(
                    url, name, body, seconds=seconds, concurrency=concurrency, folder=folder
                )
                serve_cpu = (_family_cpu_s(server.pid) - cpu) / max(1, figures["requests"])
            finally:
                _stop(server)
        finally:
            if loopback is not None:
                loopback.stdin.close()  # type: ignore[union-attr]
                loopback.wait(timeout=10)
    print(
        f"serve {model} --executor {executor} c={concurrency}: req/s {figures['rate']:.0f}  "
        f"p50 {figures['p50']:.1f} ms  p99 {figures['p99']:.1f} ms  "
        f"errors {figures['errors']:.0f}  arun runs/s {arun:.0f}  "
        f"overhead per run: {arun / figures['rate']:.2f}\n"
        f"  cpu per run: serve {1000 * serve_cpu:.2f} ms  arun {1000 * arun_cpu:.2f} ms  "
        f"ratio {serve_cpu / arun_cpu:.2f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["scripted", "loopback", "both"], default="both")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--executor", choices=["local", "process", "ray"], default="local")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench/serve.py needs wrk: apt-get install wrk")
    for model in ("scripted", "loopback") if args.model == "both" else (args.model,):
        bench(model, args.seconds, args.concurrency, args.runs, args.executor)


if __name__ == "__main__":
    main()
