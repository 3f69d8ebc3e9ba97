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

- What the service stores of a run, measured in this process: `Pipeline.outcome`
  with the service's event sink and its SQLite checkpoint journal, the run added
  running and finished in a `RunStore` as the service writes a `?wait=true` run's
  rows (no HTTP, no queue, no threads). Its rate is a second baseline: the
  service's rate against it (O2) is what HTTP, the queues and the threads add
  to a run stored as the service must store it.
- The floor: the same wrk load on a bare Starlette endpoint under uvicorn
  (its own process, configured as `serve` configures uvicorn) that only reads
  the body and answers a small JSON: its CPU per request is what any run
  served over HTTP costs on top of `Pipeline.arun`, whatever the service does.

Prints per model:

    serve MODEL c=50: req/s R  p50 A ms  p99 B ms  errors E  arun runs/s S  overhead per run: O
      cpu per run: serve X ms  arun Y ms  ratio Z
      server cpu per run by thread: main thread M ms  other threads T ms
      floor: a bare Starlette endpoint under uvicorn: cpu per request F ms (R req/s);
      (arun + bare) / arun Q; with the run's events built, nothing kept (...) Q2
      in process, the run with what the service stores of it (...): D ms, ...,
      K runs/s: overhead per run against it (...) O2
      in process, what each stored thing adds per run: the run alone (...) U ms;
      its events built (...) +B ms, then kept (...) +V ms; its rows +W ms;
      its checkpoint journal +J ms

The last line prices each thing the service stores, added one after the other
in this process (`durable`'s stages): what storing less would save, and what
no change to how it is stored can. Q2 is the floor of a service that streams a
run's trace events (as `GET /v1/runs/{id}/events` must), whatever it stores:
`Pipeline.arun`, the engine building the run's events, and the bare endpoint.

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


# What `durable` does of what the service stores of a run, cumulatively (`STAGES`).
STAGES = ("run", "built", "events", "rows", "journal")


def durable(
    pipeline: Path,
    inputs: dict[str, str],
    runs: int,
    concurrency: int,
    folder: Path,
    *,
    stage: str = "journal",
) -> tuple[float, float]:
    """Runs per second, and CPU seconds per run, of `Pipeline.outcome` doing in this
    process what the service stores of a run, without HTTP, queues or threads: the run
    added started, as the service adds a run a waiting worker takes (one write, in the
    journals' group commit with its end at the latest), run with the service's event
    sink and its checkpoint journal in SQLite, and finished with its events and result
    (`RunStore`), `concurrency` at once on one event loop.

    `stage` stops short, to price each stored thing: `run` is `Pipeline.outcome` and its
    result document alone; `built` adds a sink that drops each event (the engine and the
    model calls build every trace event, nothing is kept: what any service that streams
    a run's events pays, however it stores them); `events` has the service's event sink
    instead (the records made and kept, not stored); `rows` adds the run's rows (added
    running, finished with its events and result); `journal` (all of it) adds the
    checkpoint journal."""
    import uuid

    from converge_dsl import load
    from converge_dsl.runtime import Checkpointing, ListenerSink, RunSink, checkpoint_key
    from converge_dsl.serve import RunStore
    from converge_dsl.serve._events import EventSink, LiveRun
    from converge_dsl.serve._loops import Inbox

    loaded = load(pipeline)
    store = RunStore(folder / f"durable-{stage}")
    key = checkpoint_key(loaded.env)
    upto = STAGES.index(stage)

    async def main() -> tuple[float, float]:
        gate = asyncio.Semaphore(concurrency)
        loop = asyncio.get_running_loop()

        async def one() -> None:
            async with gate:
                run = uuid.uuid4().hex
                added = None
                if upto >= STAGES.index("rows"):  # as the service adds a run a worker takes
                    _, added = store.add_later(  # at once for a `?wait=true` request
                        run,
                        loaded.name,
                        {"inputs": inputs},
                        time.time(),
                        running=True,
                        urgent=False,
                    )
                live = LiveRun(0, loop)
                checkpoint = None
                if upto >= STAGES.index("journal"):
                    journal = store.checkpoints.journal(
                        run, alongside=lambda: store.event_statements(run, live.unstored())
                    )
                    checkpoint = Checkpointing(folder, journal=journal, env=loaded.env, key=key)
                sinks: tuple[RunSink, ...] = ()
                if upto >= STAGES.index("events"):
                    sinks = (EventSink(live, lambda: store.add_events(run, live.unstored())),)
                elif upto == STAGES.index("built"):
                    sinks = (ListenerSink(lambda event: None),)
                out = await loaded.outcome(inputs, sinks=sinks, checkpoint=checkpoint)
                body = out.plain
                assert body["stop_reason"] == "converged", body["stop_reason"]
                events = live.unstored()
                if upto >= STAGES.index("rows"):  # in the group commit, as the service
                    ending = store.finish_later(
                        run,
                        status="done",
                        stop_reason="converged",
                        body=body,
                        events=events,
                        now=time.time(),
                    )
                    assert await Inbox.of(loop).future(ending)  # as the service is told
                    assert added is not None
                    assert added.done()  # committed with its end or before

        await asyncio.gather(*(one() for _ in range(min(runs, 2 * concurrency))))
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one() for _ in range(runs)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        await loaded.aclose()
        return runs / elapsed, cpu / runs

    try:
        return asyncio.run(main())
    finally:
        store.close()


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


def bare_server() -> None:
    """A Starlette endpoint under uvicorn doing nothing but read the body and answer a
    small JSON (the floor of the HTTP layer): `uvicorn.Config` as `serve` makes it."""
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def answer(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"id": "0" * 32, "status": "done"})

    app = Starlette(routes=[Route("/{rest:path}", answer, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    from converge_dsl.serve._heads import HEAD_CAP, protocol

    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        server_header=False,
        timeout_keep_alive=5,
        http=protocol(),
        h11_max_incomplete_event_size=HEAD_CAP,
    )
    print(f"bare endpoint on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


def _bare() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, __file__, "--bare-server"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    if " on http://" not in line:
        process.kill()
        raise SystemExit(f"the bare endpoint did not start: {line}{process.stderr.read()}")
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


def _cpu_by_thread(pid: int) -> dict[str, float]:
    """CPU seconds of the process `pid`: its main thread (the HTTP layer and the
    service's loop) and its other threads (the run loops, SQLite's group commits)."""
    out = {"main thread": 0.0, "other threads": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        which = "main thread" if task.name == str(pid) else "other threads"
        out[which] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


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
            stages = {
                stage: durable(pipeline, inputs, runs, concurrency, folder, stage=stage)
                for stage in STAGES
            }
            durable_rate, durable_cpu = stages["journal"]
            stage_cpu = {stage: cpu for stage, (_, cpu) in stages.items()}
            built_cpu = stage_cpu["built"] - stage_cpu["run"]
            server, url = _serve(pipeline, folder, concurrency, executor)
            try:
                body = json.dumps({"inputs": inputs})
                cpu, threads = _family_cpu_s(server.pid), _cpu_by_thread(server.pid)
                figures = drive(
                    url, name, body, seconds=seconds, concurrency=concurrency, folder=folder
                )
                requests = max(1, figures["requests"])
                serve_cpu = (_family_cpu_s(server.pid) - cpu) / requests
                split = {
                    thread: (seconds_now - threads.get(thread, 0.0)) / requests
                    for thread, seconds_now in _cpu_by_thread(server.pid).items()
                }
            finally:
                _stop(server)
            bare, url = _bare()
            try:
                cpu = _cpu_s(bare.pid)
                floor = drive(
                    url, name, body, seconds=seconds, concurrency=concurrency, folder=folder
                )
                bare_cpu = (_cpu_s(bare.pid) - cpu) / max(1, floor["requests"])
            finally:
                _stop(bare)
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
        f"ratio {serve_cpu / arun_cpu:.2f}\n"
        "  server cpu per run by thread: "
        + "  ".join(f"{name} {1000 * cpu:.2f} ms" for name, cpu in sorted(split.items()))
        + f"\n  floor: a bare Starlette endpoint under uvicorn: cpu per request "
        f"{1000 * bare_cpu:.2f} ms ({floor['rate']:.0f} req/s); "
        f"(arun + bare) / arun {(arun_cpu + bare_cpu) / arun_cpu:.2f}; with the run's "
        f"events built, nothing kept (the least a service streaming them costs) "
        f"{(arun_cpu + built_cpu + bare_cpu) / arun_cpu:.2f}\n"
        f"  in process, the run with what the service stores of it (events, journal, "
        f"result; no HTTP, queue or threads): {1000 * durable_cpu:.2f} ms, "
        f"{durable_cpu / arun_cpu:.2f} x arun; with the bare endpoint "
        f"{(durable_cpu + bare_cpu) / arun_cpu:.2f} x arun; {durable_rate:.0f} runs/s: "
        f"overhead per run against it (what HTTP, queues and threads add to a run "
        f"stored as the service stores it) {durable_rate / figures['rate']:.2f}\n"
        f"  in process, what each stored thing adds per run: the run alone (outcome and "
        f"its result document) {1000 * stage_cpu['run']:.2f} ms; its events built (a sink "
        f"that drops them) +{1000 * built_cpu:.2f} ms, then kept (the service's sink, "
        f"records made) +{1000 * (stage_cpu['events'] - stage_cpu['built']):.2f} ms; its "
        f"rows (added running, finished with events and result) "
        f"+{1000 * (stage_cpu['rows'] - stage_cpu['events']):.2f} ms; its checkpoint journal "
        f"+{1000 * (stage_cpu['journal'] - stage_cpu['rows']):.2f} ms",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["scripted", "loopback", "both"], default="both")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--executor", choices=["local", "process", "ray"], default="local")
    args = parser.parse_args()
    if args.bare_server:
        bare_server()
        return
    if shutil.which("wrk") is None:
        raise SystemExit("bench/serve.py needs wrk: apt-get install wrk")
    for model in ("scripted", "loopback") if args.model == "both" else (args.model,):
        bench(model, args.seconds, args.concurrency, args.runs, args.executor)


if __name__ == "__main__":
    main()
