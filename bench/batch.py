"""Batch benchmark: cases per second per executor, compile-once speed-up, latency efficiency.

- A, B, C: cases per second of `run_batch` (what `converge-dsl run --cases
  --out` calls) for 2,000 cases of `pipelines/support-triage.yaml` on its
  scripted model, with the `local` (16 at once on one loop), `process` (one
  worker per CPU) and `ray` (one actor per CPU, a local Ray started by the
  executor) executors, timed two ways: from the batch's own clock (the
  summary's seconds: after the pipeline is loaded; starting the actors is
  inside, starting Ray is not) and over the whole `run_batch` call, loading
  included. The process executor may start its workers, or the fork server
  they are forked from, before its clock starts (here, one thread running, it
  forks them from itself once the pipeline is loaded), so only the whole call
  counts all of their start-up: the ratio `process/local` on the last line is
  of whole calls, like with like. Every batch runs in a fresh Python process,
  as `converge-dsl run --cases` does (`converge_dsl.batch` imported before the
  clock starts), so no round profits from an earlier one's (a fork server
  lives as long as the process that started it). Beside each, the CPU time the
  batch's process spent per case (`local`: the whole case; `process`, `ray`:
  the parent's share), which a loaded machine changes far less than the wall
  time.
- The start-up of the `process` workers: forked from the batch (Linux, a
  batch running one thread, as here), the CPU time of a process forked from
  one that loaded the pipeline doing what a worker does (`set_up_worker`,
  unpickling the pipeline the parent sends, and its first case); with a fork
  server, that of a fresh Python process importing what the server imports
  (`_process.worker_modules()`), once for all workers, then that of a worker
  forked from it; with `spawn`, that of a fresh process doing all of it. The
  best of five, and per worker (the server's share included, one worker per
  CPU) beside the CPU per case of `local`: the cases each worker could have
  run instead, which is what keeps `process/local` under 2 on two cores.
- D: the wall time of 200 separate `converge-dsl run PIPELINE --format json`
  processes, one after the other, over the wall time of one `converge-dsl run
  PIPELINE --cases 200.jsonl --out ...` process (start-up included in both).
- E: ideal / measured wall time for 500 cases of a pipeline with two llm
  suggestors, the second reading the first's fact (two model calls in a row
  per case), on the `openai` adapter against `bench/loopback.py` (its own
  process) answering after 100 ms, `local` executor at concurrency 100, timed
  after a batch of 100 cases in the same process (its connections open):
  ideal = 500 x 2 x 0.1 s / 100 = 1 s.

Prints one line per figure, each with the one-minute load average when it was
measured, and last (one line; L the load average then):

    cases/s local: A  process: B  ray: C  process/local (whole calls): P
    compile-once speed-up: D  latency-bound efficiency: E  (load L)

The executors run in turn, `--repeat` rounds (default 3); the last line keeps
each executor's best round (its whole call; a busy machine only slows runs down).

Usage: python bench/batch.py [--cases N] [--processes N] [--latency-cases N] [--no-ray]
[--repeat N]
(smaller sizes are for a smoke test; the figures of record use the defaults).
`ray: -` when Ray is not installed (the `ray` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "support-triage.yaml"
CLI = [sys.executable, "-m", "converge_dsl"]
LATENCY_PIPELINE = """\
apiVersion: converge-dsl/v1
kind: Pipeline
name: latency
models:
  fake: {{adapter: openai, base_url: "http://127.0.0.1:{port}/v1", model: bench}}
suggestors:
  - name: first
    kind: llm
    model: fake
    target: hypotheses
    prompt: {{user: "first"}}
    output: {{format: text, id: first}}
  - name: second
    kind: llm
    model: fake
    dependencies: [hypotheses]
    target: strategies
    prompt: {{user: "second"}}
    output: {{format: text, id: second}}
"""


def load_average() -> str:
    """The one-minute load average now, to print beside a figure (a loaded machine
    changes wall rates far more than CPU times or ratios)."""
    return f"load {os.getloadavg()[0]:.2f}"


def _cases(folder: Path, count: int) -> Path:
    path = folder / f"cases-{count}.jsonl"
    path.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(count)))
    return path


def _rate(
    pipeline: Path,
    cases: Path,
    out: Path,
    executor: str,
    concurrency: int | None,
    *,
    warm: Path | None = None,
) -> float:
    """Cases per second of one batch (after a batch of `warm` cases in the same process);
    every case must converge."""
    return _measured(pipeline, cases, out, executor, concurrency, warm=warm)[0]


_BATCH = """\
import json, sys, time
from pathlib import Path
from converge_dsl.batch import BatchOptions, run_batch
pipeline, cases, out, executor, concurrency, warm = sys.argv[1:]
options = BatchOptions(
    pipeline=Path(pipeline), cases=Path(cases), out=Path(out), executor=executor,
    concurrency=int(concurrency) if concurrency else None,
)
if warm:  # a batch before the timed one, in this process (E: connections, first calls)
    from dataclasses import replace
    run_batch(replace(options, cases=Path(warm), out=Path(out + ".warm")))
started, wall = time.process_time(), time.perf_counter()
summary = run_batch(options)
cpu, wall = time.process_time() - started, time.perf_counter() - wall
if summary.failed or not summary.run:
    raise SystemExit(f"the batch did not converge everywhere: {summary}")
print(json.dumps({"run": summary.run, "seconds": summary.seconds, "wall": wall, "cpu": cpu}))
"""


def _measured(
    pipeline: Path,
    cases: Path,
    out: Path,
    executor: str,
    concurrency: int | None,
    *,
    warm: Path | None = None,
) -> tuple[float, float, float]:
    """Cases per second of one batch, run in a fresh process, by its own clock and over
    the whole call (loading included), and the CPU time per case of that process (with
    `local` the whole case; with `process` and `ray` what the parent spends on one:
    handing it over, taking its result, writing its line)."""
    arguments = [str(pipeline), str(cases), str(out), executor, str(concurrency or "")]
    arguments.append(str(warm or ""))
    done = subprocess.run(
        [sys.executable, "-c", _BATCH, *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the {executor} batch failed:\n{done.stderr}")
    measured = json.loads(done.stdout.splitlines()[-1])
    run = measured["run"]
    return run / measured["seconds"], run / measured["wall"], measured["cpu"] / run


# After its first case, a worker's CPU per case in chunks like the batch's (best of 5 x 4).
_PER_CASE = """\
def _per_case(_process, Case):
    import time
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        for _ in range(4):
            done = _process._run([Case(i, i, {}) for i in range(_process.CHUNK)])
            assert all(r.stop_reason == "converged" for r in done)
        best = min(best, (time.process_time() - started) / (4 * _process.CHUNK))
    return best
"""
# A fresh process doing what the process the workers are forked from does before: the fork
# server imports `worker_modules()`; the batch loads the pipeline, as every executor does
# (not counted). Then a worker forked from it.
_FORKED_WORKER = (
    _PER_CASE
    + """\
import importlib, os, sys, time
from pathlib import Path
started = time.process_time()
from converge_dsl.batch import _process, load
if sys.argv[2] == "server":
    for module in _process.worker_modules():
        importlib.import_module(module)
    shared = time.process_time() - started
else:
    load(Path(sys.argv[3]))
    shared = 0.0
read, write = os.pipe()
child = os.fork()
if child:
    os.close(write)  # a child that fails before it writes ends the read, not a hang
if child == 0:
    started = time.process_time()
    from converge_dsl.batch import Case
    from converge_dsl.batch._outputs import CaseOutputs
    _process.set_up_worker(None, None, CaseOutputs(), os.getppid())
    done = _process._run([Case(0, 0, {})], Path(sys.argv[1]).read_bytes())
    spent = time.process_time() - started if done[0].stop_reason == "converged" else -1.0
    os.write(write, f"{spent} {_per_case(_process, Case)}".encode())
    os._exit(0)
os.waitpid(child, 0)
print(shared, os.read(read, 64).decode())
"""
)
# A fresh process doing all that a spawned worker does.
_SPAWNED_WORKER = (
    _PER_CASE
    + """\
import os, sys, time
from pathlib import Path
started = time.process_time()
from converge_dsl.batch import Case, _process
from converge_dsl.batch._outputs import CaseOutputs
_process.set_up_worker(None, None, CaseOutputs(), os.getppid())
done = _process._run([Case(0, 0, {})], Path(sys.argv[1]).read_bytes())
assert done[0].stop_reason == "converged", done[0].stop_reason
print(0.0, time.process_time() - started, _per_case(_process, Case))
"""
)


def _worker_start_up(folder: Path, repeats: int = 5) -> tuple[float, float, float]:
    """CPU seconds the `process` workers spend before their first case is finished: what
    the fork server imports once (0 forked from the batch or with `spawn`), then each
    worker to its first case;
    and a worker's CPU seconds per case after it (the best of `repeats` fresh processes)."""
    import pickle

    from converge_dsl.batch import _process, load

    # This process runs one thread, as the batch's does: its workers are forked from it.
    parent = "batch" if _process._forks() else _process._context().get_start_method()
    pickled = folder / "pipeline.pickle"
    pickled.write_bytes(pickle.dumps(load(PIPELINE), pickle.HIGHEST_PROTOCOL))
    script = _SPAWNED_WORKER if parent == "spawn" else _FORKED_WORKER
    shared, each, per_case = float("inf"), float("inf"), float("inf")
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-c", script, str(pickled), parent, str(PIPELINE)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        server, worker, case = (float(x) for x in done.stdout.split()[-3:])
        if worker < 0:
            raise SystemExit("the worker's first case did not converge")
        shared, each, per_case = min(shared, server), min(each, worker), min(per_case, case)
    return shared, each, per_case


def _speed_up(folder: Path, count: int) -> float:
    """D: `count` separate `run` processes over one batch process of the same cases."""
    started = time.perf_counter()
    for _ in range(count):
        subprocess.run(
            [*CLI, "run", str(PIPELINE), "--format", "json"], check=True, capture_output=True
        )
    separate = time.perf_counter() - started
    cases, out = _cases(folder, count), folder / "d.jsonl"
    started = time.perf_counter()
    subprocess.run(
        [*CLI, "run", str(PIPELINE), "--cases", str(cases), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    batch = time.perf_counter() - started
    print(
        f"{count} separate processes: {separate:.1f} s  one batch: {batch:.2f} s  "
        f"({load_average()})"
    )
    return separate / batch


def _efficiency(folder: Path, count: int, concurrency: int = 100, latency: float = 0.1) -> float:
    """E: ideal / measured wall time of `count` cases of two 100 ms calls at `concurrency`."""
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "loopback.py"), str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = server.stdout.readline().split()[1]
        pipeline = folder / "latency.yaml"
        pipeline.write_text(LATENCY_PIPELINE.format(port=port))
        warm = _cases(folder, concurrency)
        rate = _rate(
            pipeline, _cases(folder, count), folder / "e.jsonl", "local", concurrency, warm=warm
        )
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait()
    measured = count / rate
    ideal = count * 2 * latency / concurrency
    print(
        f"latency-bound: {count} cases in {measured:.2f} s (ideal {ideal:.2f} s)  "
        f"({load_average()})"
    )
    return ideal / measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=200)
    parser.add_argument("--latency-cases", type=int, default=500)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, best of each kept")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        cases = _cases(folder, args.cases)
        rates: dict[str, str] = {}
        whole: dict[str, float] = {}
        cpus: dict[str, float] = {}
        executors = [e for e in ("local", "process", "ray") if e != "ray" or _runs_ray(args)]
        rates["ray"] = "-"
        for round_ in range(args.repeat):  # interleaved; the best of each is kept
            for executor in executors:
                out = folder / f"{executor}-{round_}.jsonl"
                rate, call, cpu = _measured(PIPELINE, cases, out, executor, None)
                cpus[executor] = min(cpu, cpus.get(executor, cpu))
                if call > whole.get(executor, 0.0):
                    rates[executor], whole[executor] = f"{rate:.1f}", call
                whose = "per case" if executor == "local" else "of the parent per case"
                print(
                    f"{executor}: {args.cases} cases, {rate:.1f} cases/s "
                    f"(whole call, loading included: {call:.1f}), "
                    f"CPU {whose} {cpu * 1e6:.0f} us  ({load_average()})",
                    flush=True,
                )
        shared, each, worker_case = _worker_start_up(folder)
        workers = os.cpu_count() or 1
        per_worker, local_case = shared / workers + each, cpus["local"]
        server = f"{shared * 1e3:.0f} ms once (fork server), then " if shared else ""
        print(
            f"process worker start-up CPU (to its first case): {server}"
            f"{each * 1e3:.0f} ms each; per worker of {workers}: "
            f"{per_worker * 1e3:.0f} ms, {per_worker / local_case:.0f} cases of local at "
            f"{local_case * 1e6:.0f} us each; then a worker's CPU per case "
            f"{worker_case * 1e6:.0f} us  ({load_average()})",
            flush=True,
        )
        speed_up = _speed_up(folder, args.processes)
        efficiency = _efficiency(folder, args.latency_cases)
    print(
        f"cases/s local: {rates['local']}  process: {rates['process']}  ray: {rates['ray']}  "
        f"process/local (whole calls): {whole['process'] / whole['local']:.2f}  "
        f"compile-once speed-up: {speed_up:.1f}  latency-bound efficiency: {efficiency:.2f}  "
        f"({load_average()})"
    )


def _runs_ray(args: argparse.Namespace) -> bool:
    return not args.no_ray and _has_ray()


def _has_ray() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
