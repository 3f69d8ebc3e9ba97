"""Events benchmark: what a run's trace events cost, and where, in this process.

`pipelines/market-entry.yaml` on its scripted model (32 events a run), its runs
`Pipeline.outcome` `--concurrency` at once on one event loop, as
`bench/serve.py`'s in-process stages run them; CPU time of this process per run
(min over `--rounds` rounds, the stages alternating within each round):

- `run`: no sink listens; the engine builds no event.
- `built`: a sink listens and drops each event: the engine and the model calls
  build every event, the run's hub hands it on.
- `kept`: the service's event sink (`converge_dsl.serve._events.EventSink`):
  each event's compact record made and kept in its `LiveRun`, not stored.

Then, per event of one recorded run, in a tight loop (warm caches: a run
interleaves its events with all its other work, and pays about twice these):
building each event by its keyword call `Event(**fields)` against its
validator's `validate_python(fields)` (the same validation and the same model,
without the keyword call) and against `engine.events.from_fields(Event,
fields)` (that validator behind one call: how the engine builds its events),
and the service's record of it (`event_json`, the whole `on_event`).

Prints:

    load average L
    per run: run R ms  built B ms (+X us, Y us an event)  kept K ms (+Z us, W us an event)
    per event, warm: build by keywords A us, by validator V us, by from_fields F us;
    its timing by keywords T us, by validator U us; event_json J us; on_event O us

With `--against TREE` (an older checkout holding `converge_dsl`; run
`python -m compileall` on both trees first), the three stages of this tree
and of TREE instead, each in a fresh process with that tree's package, in
turn, round by round: each stage's minimum per tree and the ratios new/old of
what the events cost (built less run, kept less built, and both).

On a 2-core machine at load average 1.7 to 2.0, two runs: run 1.95 to 2.01 ms,
built +572 to +608 us (18 to 19 us an event), kept +438 to +548 us (14 to 17 us
an event); warm, an event built by keywords 4.3 to 4.5 us, by its validator 3.1
to 3.2 us, its JSON 3.2 to 3.3 us, the sink's whole record 5.7 to 5.9 us. Counted
in instructions (valgrind's cachegrind, the run with the service's records, 120
runs less 20), building every engine event by its validator instead of by
keywords saves 150 thousand of the 1.85 million instructions a run's events
and records cost (5.69 million a kept run, 3.84 million a bare one).

The event log handing events straight to the hub, and each `Timing` and
model-call event built by its validator (f623ba5 -> this tree), counted by
callgrind (500 runs less 100, `PYTHONHASHSEED=0`, per run): built 4.771 ->
4.694 million instructions, kept 5.511 -> 5.421 million, on a bare run of 3.67
million: the events and their records 1.837 -> 1.745 million (-5%). Timed on a
machine 3.5 times faster, at load average 4.0 to 6.5 (`--against`, 5 rounds):
events and records +343 -> +286 us a run (0.83).

The engine's own emission sites (`engine/_run.py`, `_admission.py`,
`_opening.py`) building their events by `from_fields` too (02a2a55 -> this
tree), counted the same way: built 4.728 -> 4.596 million instructions, kept
5.464 -> 5.314 to 5.321 million, on a bare run of 3.69 to 3.71 million (these
vary by up to 20 thousand between trees that differ in nothing the stage
runs): the events and their records 1.755 -> 1.616 to 1.632 million (-8%). Timed
(`--against`, 5 rounds, twice, load average 3.0 to 3.5): events built 0.85 of
the old tree's cost both times; the records' ratio (1.01, 1.18) is noise.

Usage: python bench/events.py [--runs N] [--concurrency N] [--rounds N] [--against TREE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "market-entry.yaml"
INPUTS = {"market": "Baltic 3PL"}
STAGES = ("run", "built", "kept")


def per_run(stage: str, runs: int, concurrency: int) -> float:
    """CPU seconds per run of `Pipeline.outcome` with `stage`'s sink (see the module)."""
    from converge_dsl import load
    from converge_dsl.runtime import ListenerSink, RunSink
    from converge_dsl.serve._events import EventSink, LiveRun

    loaded = load(PIPELINE)

    async def main() -> float:
        gate = asyncio.Semaphore(concurrency)
        loop = asyncio.get_running_loop()

        async def one() -> None:
            async with gate:
                sinks: tuple[RunSink, ...] = ()
                if stage == "built":
                    sinks = (ListenerSink(lambda event: None),)
                elif stage == "kept":
                    live = LiveRun(0, loop)
                    sinks = (EventSink(live, live.unstored),)
                out = await loaded.outcome(INPUTS, sinks=sinks)
                assert out.plain["stop_reason"] == "converged"

        await asyncio.gather(*(one() for _ in range(min(runs, 2 * concurrency))))
        cpu = time.process_time()
        await asyncio.gather(*(one() for _ in range(runs)))
        cpu = time.process_time() - cpu
        await loaded.aclose()
        return cpu / runs

    return asyncio.run(main())


def _events() -> list[BaseModel]:
    from converge_dsl import load
    from converge_dsl.runtime import ListenerSink

    seen: list[BaseModel] = []
    loaded = load(PIPELINE)

    async def main() -> None:
        await loaded.outcome(INPUTS, sinks=(ListenerSink(seen.append),))
        await loaded.aclose()

    asyncio.run(main())
    return seen


def _cpu_us(work: Callable[[], object], repeat: int = 200, rounds: int = 7) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(repeat):
            work()
        best = min(best, time.process_time() - start)
    return best / repeat * 1e6


def warm(events: list[BaseModel]) -> dict[str, float]:
    """Microseconds an event (the run's events, each once a repeat), in a tight loop."""
    from converge_dsl.clock import SystemClock
    from converge_dsl.engine import Timing
    from converge_dsl.engine.events import from_fields
    from converge_dsl.serve._events import EventSink, LiveRun, event_json

    shapes: list[tuple[type[BaseModel], dict[str, Any]]] = [
        (type(event), dict(event.__dict__)) for event in events
    ]
    for kind, fields in shapes:
        assert kind.__pydantic_validator__.validate_python(fields) == kind(**fields)

    def by_keywords() -> None:
        for kind, fields in shapes:
            kind(**fields)

    def by_validator() -> None:
        for kind, fields in shapes:
            kind.__pydantic_validator__.validate_python(fields)

    def by_from_fields() -> None:
        for kind, fields in shapes:
            from_fields(kind, fields)

    timing_fields = {"at": 12.5, "duration_s": 0.25}
    validate_timing = Timing.__pydantic_validator__.validate_python

    def timing_by_keywords() -> None:
        for _ in events:
            Timing(at=12.5, duration_s=0.25)

    def timing_by_validator() -> None:
        for _ in events:
            validate_timing(timing_fields)

    def to_json() -> None:
        for event in events:
            event_json(event)

    loop = asyncio.new_event_loop()

    def on_event() -> None:
        live = LiveRun(0, loop)
        sink = EventSink(live, live.unstored)
        sink.open(SystemClock())
        for event in events:
            sink.on_event(event)

    try:
        count = len(events)
        return {
            name: _cpu_us(work) / count
            for name, work in (
                ("keywords", by_keywords),
                ("validator", by_validator),
                ("from_fields", by_from_fields),
                ("timing keywords", timing_by_keywords),
                ("timing validator", timing_by_validator),
                ("event_json", to_json),
                ("on_event", on_event),
            )
        }
    finally:
        loop.close()


def measured(tree: Path, stage: str, runs: int, concurrency: int) -> float:
    """`per_run(stage)` in a fresh process with `tree`'s `converge_dsl` (this file's code)."""
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--stage",
            stage,
            f"--runs={runs}",
            f"--concurrency={concurrency}",
        ],
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(done.stdout.splitlines()[-1]))


def against(other: Path, runs: int, concurrency: int, rounds: int) -> None:
    """The stages of this tree and of `other`, each in its own process, in turn, round by
    round; each stage's minimum, and what the events cost in each tree."""
    trees = {"old": other.resolve(), "new": ROOT}
    figures = {(name, stage): float("inf") for name in trees for stage in STAGES}
    for number in range(rounds):
        for stage in STAGES:
            for name, tree in trees.items():
                cpu = measured(tree, stage, runs, concurrency)
                figures[name, stage] = min(figures[name, stage], cpu)
        print(f"round {number + 1} done, load average {os.getloadavg()[0]:.1f}", flush=True)
    costs: dict[str, tuple[float, float]] = {}
    for name, tree in trees.items():
        ms = {stage: figures[name, stage] * 1000 for stage in STAGES}
        built, kept = (ms["built"] - ms["run"]) * 1000, (ms["kept"] - ms["built"]) * 1000
        costs[name] = built, kept
        print(
            f"{name} ({tree}): run {ms['run']:.3f} ms  built {ms['built']:.3f} ms "
            f"(+{built:.0f} us)  kept {ms['kept']:.3f} ms (+{kept:.0f} us); "
            f"events and records +{built + kept:.0f} us a run"
        )
    (old_built, old_kept), (new_built, new_kept) = costs["old"], costs["new"]
    print(
        f"new/old: events built {new_built / old_built:.2f}, records kept "
        f"{new_kept / old_kept:.2f}, both {(new_built + new_kept) / (old_built + old_kept):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--against",
        type=Path,
        help="an older tree (holding converge_dsl): its stages and this tree's, in turn",
    )
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)  # one, for `measured`
    args = parser.parse_args()
    if args.stage is not None:
        print(json.dumps(per_run(args.stage, args.runs, args.concurrency)))
        return
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if args.against is not None:
        against(args.against, args.runs, args.concurrency, args.rounds)
        print(f"load average {os.getloadavg()[0]:.1f}")
        return
    events = _events()
    figures: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for _ in range(args.rounds):
        for stage in STAGES:
            figures[stage].append(per_run(stage, args.runs, args.concurrency))
    ms = {stage: min(values) * 1000 for stage, values in figures.items()}
    built, kept = (ms["built"] - ms["run"]) * 1000, (ms["kept"] - ms["built"]) * 1000
    count = len(events)
    print(
        f"per run: run {ms['run']:.2f} ms  built {ms['built']:.2f} ms (+{built:.0f} us, "
        f"{built / count:.1f} us an event)  kept {ms['kept']:.2f} ms (+{kept:.0f} us, "
        f"{kept / count:.1f} us an event), {count} events a run"
    )
    each = warm(events)
    print(
        f"per event, warm: build by keywords {each['keywords']:.2f} us, by validator "
        f"{each['validator']:.2f} us, by from_fields {each['from_fields']:.2f} us; "
        f"its timing by keywords {each['timing keywords']:.2f} us, "
        f"by validator {each['timing validator']:.2f} us; event_json {each['event_json']:.2f} us; "
        f"on_event {each['on_event']:.2f} us"
    )


if __name__ == "__main__":
    main()
