"""Checkpoint overhead: a 1,500-cycle run with `--checkpoint` against the same run without.

Generates (in a temp folder) a pipeline of 1,500 rules in a chain: rule i
depends on key k(i-1) and emits one fact to k(i), so the run takes 1,500
cycles and promotes one fact per cycle, the worst case for checkpoints (a
write per cycle for the least work per cycle). Times the whole
`converge-dsl run PIPELINE --format json` (load, validate, compile, run,
result document), in this process through the command line's `run`, with
`--checkpoint DIR` (a fresh folder each time) and without, interleaved, and
keeps the minimum of each. Every checkpointed record is fdatasynced, so the
figure includes the disk of the temp folder.

It then prices the writing of a record body: the CPU time to encode every
record of that journal (1,500 cycle records) with `json.dumps` (sorted keys,
what the journal wrote before) and with `_journal.encode` (pydantic's JSON
writer, what it writes now), min of the repeats:

    record bodies: json.dumps A us, encode B us per record (A/B x)

and the writing of the journal of a short served run (what a service pays per
run): the CPU time of `CheckpointStore.start` and the `save` of each cycle of
a run of pipelines/market-entry.yaml (its states recorded once, then saved
again and again into a medium that keeps the lines and writes nothing), the
body of each of its records encoded as the engine's `to_data` shapes give it
(what the journal wrote before) and as the store gives it now (`_thawed`),
and the seal of a 2 KiB body beside a thread busy in Python, hashed at once
(as before: hashlib lets go of the GIL and the busy thread keeps it) and as
`seal` hashes it now (the mean wall time: it needs a free core for the busy
thread to show), min of the repeats for the others:

    journal of a served run: start + N saves S us per run (R records, sha256 H)
    its record bodies: to_data E us, thawed T us per run (E/T x)
    seal beside a busy thread: at once W us, in pieces P us wall per record (W/P x)

`--ab OLD_TREE` prints only the first of these, from this tree and from
OLD_TREE (`PYTHONPATH`) in turn, `--repeats` times each, and their ratio.

Last line:

    checkpoint overhead: X

X = min time with `--checkpoint` / min time without (target <= 1.3).

Run: .venv/bin/python bench/checkpoint.py [--cycles N] [--repeats R] [--ab OLD_TREE]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CYCLES = 1_500
REPEATS = 5
ROOT = Path(__file__).resolve().parents[1]
SCRIPTED = ROOT / "pipelines" / "market-entry.yaml"
SERVED_RUNS = 2_000


def pipeline_text(cycles: int) -> str:
    lines = [
        "apiVersion: converge-dsl/v1",
        "kind: Pipeline",
        "name: checkpoint-bench",
        "keys:",
        *(f"  - name: k{i:04d}" for i in range(cycles)),
        f"budget: {{max_cycles: {cycles + 10}, max_facts: {cycles + 10}}}",
        "seeds: [{id: start, content: go}]",
        "suggestors:",
    ]
    for i in range(cycles):
        source = "seeds" if i == 0 else f"k{i - 1:04d}"
        lines += [
            f"  - name: r{i:04d}",
            "    kind: rule",
            f"    dependencies: [{source}]",
            f"    emit: [{{key: k{i:04d}, id: 'f{i}', content: 'step {i}'}}]",
        ]
    return "\n".join(lines) + "\n"


def run_once(pipeline: Path, checkpoint: Path | None) -> float:
    from converge_dsl.cli import run

    argv = [str(pipeline), "--format", "json"]
    if checkpoint is not None:
        argv += ["--checkpoint", str(checkpoint)]
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    code = run(["run", *argv], out, err)
    elapsed = time.perf_counter() - started
    assert code == 0, err.getvalue()
    return elapsed


def encoding(bodies: list[dict[str, object]], repeats: int) -> tuple[float, float]:
    """CPU seconds per record body to encode `bodies` with sorted `json.dumps` and with
    `_journal.encode` (min of `repeats`)."""
    from converge_dsl.runtime._journal import encode

    def canonical(body: dict[str, object]) -> bytes:
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8")

    figures = []
    for encoder in (canonical, encode):
        best = float("inf")
        for _ in range(repeats):
            cpu = time.process_time()
            for body in bodies:
                encoder(body)
            best = min(best, time.process_time() - cpu)
        figures.append(best / len(bodies))
    return figures[0], figures[1]


class KeptLines:
    """A journal medium that keeps the lines it is given and writes nothing."""

    where = "bench"
    decisions_where = "bench/decisions"

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def replace(self, line: bytes) -> None:
        self.lines = [line]

    def append(self, line: bytes) -> None:
        self.lines.append(line)

    def clear_decisions(self) -> None:
        pass

    def close(self) -> None:
        pass


def served_states() -> tuple[str, dict[str, Any], list[Any]]:
    """The pipeline text, inputs and the engine states `save` is given in one run of
    pipelines/market-entry.yaml."""
    from converge_dsl import load
    from converge_dsl.runtime import Checkpointing, CheckpointStore

    loaded, inputs = load(SCRIPTED), {"market": "Baltic 3PL"}
    states: list[Any] = []
    save = CheckpointStore.save

    def recording(store: CheckpointStore, state: Any) -> None:
        states.append(state)
        save(store, state)

    CheckpointStore.save = recording  # type: ignore[method-assign,assignment]
    try:
        with tempfile.TemporaryDirectory() as temp:
            asyncio.run(loaded.outcome(inputs, checkpoint=Checkpointing(Path(temp))))
    finally:
        CheckpointStore.save = save  # type: ignore[method-assign]
    return SCRIPTED.read_text(encoding="utf-8"), inputs, states


def served_journal(repeats: int) -> tuple[float, int, str]:
    """CPU seconds per run of `start` + every `save` of a market-entry run (min of
    `repeats` rounds of `SERVED_RUNS` runs); its records and their SHA-256 (the nonce
    made of zeros: two trees writing the same bytes print the same)."""
    from converge_dsl.runtime import CheckpointStore, pipeline_digest

    text, inputs, states = served_states()
    digest, key = pipeline_digest(text, inputs), bytes(range(32))
    best, medium = float("inf"), KeptLines()
    for _ in range(repeats):
        cpu = time.process_time()
        for _ in range(SERVED_RUNS):
            medium = KeptLines()
            store = CheckpointStore(None, key, medium=medium, random_bytes=bytes)  # type: ignore[arg-type]
            store.start(pipeline_text=text, digest=digest, inputs=inputs)
            for state in states:
                store.save(state)
            store.close()
        best = min(best, (time.process_time() - cpu) / SERVED_RUNS)
    return best, len(medium.lines), hashlib.sha256(b"".join(medium.lines)).hexdigest()[:16]


def served_bodies(repeats: int) -> tuple[float, float]:
    """CPU seconds per market-entry run to encode its record bodies built from the
    engine's `to_data` shapes and as the store builds them (`_thawed`)."""
    from converge_dsl.engine.state import fact_to_data, usage_to_data
    from converge_dsl.runtime._checkpoint import _fact_data
    from converge_dsl.runtime._journal import encode

    _, _, states = served_states()
    figures = []
    for fact_data in (fact_to_data, _fact_data):
        best, done = float("inf"), 0
        for _ in range(repeats):
            cpu = time.process_time()
            for _ in range(SERVED_RUNS):
                done = 0
                for state in states:
                    body = {
                        "kind": "cycle",
                        "cycle": state.cycle,
                        "lamport": state.lamport,
                        "dirty": list(state.dirty)
                        if fact_data is fact_to_data
                        else [str(key) for key in state.dirty],
                        "usage": usage_to_data(state.usage),
                        "facts": [fact_data(fact) for fact in state.facts[done:]],
                    }
                    encode(body)
                    done = len(state.facts)
            best = min(best, (time.process_time() - cpu) / SERVED_RUNS)
        figures.append(best)
    return figures[0], figures[1]


def busy_seal(repeats: int) -> tuple[float, float]:
    """Wall seconds per seal of a 2 KiB body beside a thread busy in Python: hashed at
    once (the GIL let go) and by `seal` (in pieces); the mean, not the minimum, of
    interleaved rounds: how long the busy thread keeps the GIL varies, and is the cost."""
    from converge_dsl.runtime._journal import _keyed, seal

    key, previous, body = bytes(range(32)), "0" * 64, b"x" * 2100

    def at_once(key: bytes, previous: str, body: bytes) -> tuple[str, bytes]:
        keyed = _keyed(key).copy()
        keyed.update(previous.encode("ascii") + b"\n" + body)
        return keyed.hexdigest(), body

    assert at_once(key, previous, body)[0] == seal(key, previous, body)[0]
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            sum(range(100))

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    figures: dict[Any, float] = {at_once: 0.0, seal: 0.0}
    try:
        for _ in range(repeats * 20):
            for sealer, spent in figures.items():
                started = time.perf_counter()
                for _ in range(10):
                    sealer(key, previous, body)
                figures[sealer] = spent + time.perf_counter() - started
    finally:
        stop.set()
        thread.join()
    return figures[at_once] / (repeats * 200), figures[seal] / (repeats * 200)


def served_line(repeats: int) -> str:
    cpu, records, digest = served_journal(repeats)
    return (
        f"journal of a served run: start + {records - 1} saves {cpu * 1e6:.1f} us per run "
        f"({records} records, sha256 {digest})"
    )


def ab(old_tree: str, repeats: int) -> None:
    """`served_line` from this tree and from `old_tree`, in turn, `repeats` times each."""
    figures: dict[str, list[float]] = {"old": [], "new": []}
    trees = {"old": old_tree, "new": str(ROOT)}
    for _ in range(repeats):
        for name, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": tree}
            out = subprocess.run(
                [sys.executable, __file__, "--served-only", "--repeats", "3"],
                env=env, capture_output=True, text=True, check=True, cwd=tree,
            ).stdout  # fmt: skip
            print(f"{name}: {out.strip()}")
            figures[name].append(float(out.split(" saves ")[1].split(" us")[0]))
    old, new = min(figures["old"]), min(figures["new"])
    print(f"journal of a served run, min of {repeats}: old {old:.1f} us, new {new:.1f} us "
          f"per run (old/new {old / new:.2f} x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=CYCLES)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--ab", metavar="OLD_TREE", help="old tree against this one")
    parser.add_argument("--served-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.served_only:
        print(served_line(args.repeats))
        return
    if args.ab:
        ab(args.ab, args.repeats)
        return
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        pipeline = folder / "chain.yaml"
        pipeline.write_text(pipeline_text(args.cycles), encoding="utf-8")
        run_once(pipeline, folder / "warm")  # imports, caches, and the user's key
        plain, checkpointed = [], []
        for repeat in range(args.repeats):
            plain.append(run_once(pipeline, None))
            checkpointed.append(run_once(pipeline, folder / f"ck{repeat}"))
        journal = folder / "ck0" / "checkpoint.jsonl"
        records = journal.read_text(encoding="utf-8").splitlines()
        last = json.loads(records[-1])["record"]
        assert last["cycle"] == args.cycles, last["cycle"]
        size = journal.stat().st_size
        dumps, encoded = encoding([json.loads(r)["record"] for r in records[1:]], args.repeats)
    base, with_ck = min(plain), min(checkpointed)
    print(f"pipeline: {args.cycles} rules in a chain, one fact per cycle")
    print(f"run without --checkpoint: {base:.3f} s (min of {args.repeats})")
    print(f"run with --checkpoint:    {with_ck:.3f} s (min of {args.repeats})")
    print(f"journal: {len(records)} records, {size} bytes")
    print(
        f"record bodies: json.dumps {dumps * 1e6:.1f} us, encode {encoded * 1e6:.1f} us "
        f"per record ({dumps / encoded:.1f} x)"
    )
    print(served_line(args.repeats))
    before, thawed = served_bodies(args.repeats)
    print(
        f"its record bodies: to_data {before * 1e6:.1f} us, thawed {thawed * 1e6:.1f} us "
        f"per run ({before / thawed:.2f} x)"
    )
    at_once, pieces = busy_seal(args.repeats)
    print(
        f"seal beside a busy thread: at once {at_once * 1e6:.1f} us, in pieces "
        f"{pieces * 1e6:.1f} us wall per record ({at_once / pieces:.1f} x)"
    )
    print(f"checkpoint overhead: {with_ck / base:.2f}")


if __name__ == "__main__":
    main()
