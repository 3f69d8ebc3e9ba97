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

Last line:

    checkpoint overhead: X

X = min time with `--checkpoint` / min time without (target <= 1.3).

Run: .venv/bin/python bench/checkpoint.py [--cycles N] [--repeats R]
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from pathlib import Path

CYCLES = 1_500
REPEATS = 5


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=CYCLES)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
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
    print(f"checkpoint overhead: {with_ck / base:.2f}")


if __name__ == "__main__":
    main()
