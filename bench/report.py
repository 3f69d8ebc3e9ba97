"""Benchmark: `converge-dsl report` on a trace of 100,000 events.

Generates a synthetic trace in a temporary folder: a run of `--cycles` cycles
in which 8 suggestors execute concurrently, each making model calls and
proposing facts (some rejected, a few held for approval), one of them an agent
with turns, contributor messages, tool calls, compactions, summaries and stub
fallbacks; every line fits `schemas/trace-event.v1.json`. The events are
written until `--events` lines (default 100,000). Then the command
`converge-dsl report TRACE -o report.html` runs in a fresh process, timed as a
whole (start-up included); the best of `--repeat` runs counts.

Then the same trace with one fact's content holding a control character and a
regex's `\\b` (what a page shows escaped), the two traces in turn, and its time as a
ratio to the plain trace's.

Last line: `report seconds for 100k events: X  html MB: Y` (targets: X <= 5, Y <= 20).

Run: .venv/bin/python bench/report.py [--events N] [--repeat R] [--keep FILE.html]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SUGGESTORS = ("intake", "classify", "enrich", "score", "route", "reviewer", "audit", "summarise")


def _agent_events(emit: Any, name: str, cycle: int) -> None:
    """The agent's events of one cycle: turns, messages, tool calls, a compaction every 5."""
    for turn in range(2):
        emit(
            "agent_turn_started",
            suggestor=name,
            cycle=cycle,
            turn=turn,
            estimated_tokens=400 + 50 * turn,
            context_window=8000,
        )
        emit(
            "agent_contributor_fired",
            suggestor=name,
            cycle=cycle,
            turn=turn,
            contributor="remind-goal",
            kind="reminder",
            role="user",
            persist=True,
            chars=120,
            text="Reminder: evaluate each strategy against every constraint.",
        )
        emit(
            "agent_tool_called",
            suggestor=name,
            cycle=cycle,
            turn=turn,
            tool="context.read",
            is_error=False,
        )
    if cycle % 5 == 0:
        rid = f"r{cycle}"
        emit(
            "agent_compaction",
            suggestor=name,
            cycle=cycle,
            turn=1,
            level="normal",
            reduction_id=rid,
            first_turn=0,
            last_turn=0,
            tokens_before=900,
            tokens_after=300,
            replacement="summary" if cycle % 10 else "stub",
        )
        if cycle % 10:
            emit(
                "agent_summary_taken",
                suggestor=name,
                cycle=cycle,
                reduction_id=rid,
                model_id="scripted",
                prompt_version="v1",
                sha256="ab" * 32,
                chars=200,
            )
        else:
            emit(
                "agent_summary_fallback",
                suggestor=name,
                cycle=cycle,
                reduction_id=rid,
                reason="budget_exhausted",
                detail="",
            )


def _held_for_a_human(emit: Any, name: str, cycle: int, facts: int) -> int:
    """`name`'s proposal of a cycle divisible by 11 waits for a human; in the next cycle
    the decision on it is applied (every other one rejected). Facts promoted: 0 or 1."""
    held = {"suggestor": name, "key": "strategies", "reason": "key 'strategies' is gated"}
    if cycle % 11 == 0:
        emit("proposal_pending", cycle=cycle, id=f"{name}-{cycle}", **held)
        return 0
    previous = cycle - 1
    approved = previous % 22 == 0
    fid = f"{name}-{previous}"
    decision = "approved" if approved else "rejected"
    emit("proposal_decided", cycle=previous, id=fid, decision=decision, **held)
    if not approved:
        return 0
    emit(
        "fact_promoted",
        cycle=previous,
        suggestor=name,
        key="strategies",
        id=fid,
        gate="human",
        logical_time=facts + 1,
        content=f"{name} plan for case {previous}",
        confidence=0.9,
        source=f"{name}@bench",
    )
    return 1


def synthetic_trace(path: Path, events: int = 100_000) -> int:
    """Write a trace of about `events` lines to `path` (see the module docstring); its length."""
    lines: list[dict[str, Any]] = []
    now = [0.0]
    span = {"file": "pipeline.yaml", "line": 10, "column": 5, "end_line": 14, "end_column": 1}

    def emit(
        event_type: str, at: float | None = None, duration: float | None = None, **fields: Any
    ) -> None:
        timing = None if at is None else {"at": round(at, 6), "duration_s": duration}
        second = int(now[0])
        stamp = (
            f"2026-01-01T00:{second // 60 % 60:02d}:{second % 60:02d}.{int(now[0] % 1 * 1e6):06d}Z"
        )
        suggestor = fields.get("suggestor")
        lines.append(
            {
                "seq": len(lines),
                "type": event_type,
                # agents' events have no timing field
                **({} if event_type.startswith("agent_") else {"timing": timing}),
                **fields,
                "span": span if isinstance(suggestor, str) and suggestor != "seeds" else None,
                "time": stamp,
            }
        )

    budget = {
        "max_cycles": 100_000,
        "max_facts": 200_000,
        "max_model_calls": None,
        "max_tokens": 50_000_000,
        "max_wall_s": 3600.0,
        "max_concurrency": 32,
    }
    emit(
        "run_started",
        0.0,
        suggestors=len(SUGGESTORS),
        seeds=0,
        resumed_from_cycle=None,
        budget=budget,
    )
    cycle = calls = facts = tokens = 0
    while len(lines) < events - 1:
        cycle += 1
        start = now[0]
        emit("cycle_started", start, cycle=cycle, dirty_keys=["seeds"], candidates=list(SUGGESTORS))
        for name in SUGGESTORS:
            emit("suggestor_started", start, cycle=cycle, suggestor=name)
        ends = []
        for index, name in enumerate(SUGGESTORS):
            t = start + 0.001 * index
            if name == "reviewer":
                _agent_events(emit, name, cycle)
            calls += 1
            latency = 0.02 + 0.01 * (index % 3)
            emit("model_call_started", t, call=calls, model="default", suggestor=name, turn=None)
            emit(
                "model_call_attempt",
                t + latency,
                latency,
                call=calls,
                model="default",
                suggestor=name,
                attempt=1,
                account="main",
                status_code=200,
                error=None,
            )
            emit(
                "model_call_finished",
                t + latency,
                latency,
                call=calls,
                model="default",
                suggestor=name,
                status="ok",
                status_code=200,
                attempts=1,
                model_id="gpt-test",
                account="main",
                input_tokens=300,
                output_tokens=40,
                stop_reason="end_turn",
            )
            tokens += 340
            end = t + latency + 0.002
            ends.append(end)
            emit("suggestor_finished", end, end - start, cycle=cycle, suggestor=name, proposals=1)
        for name in SUGGESTORS:
            fid = f"{name}-{cycle}"
            if name == "route" and cycle % 11 in (0, 1):
                facts += _held_for_a_human(emit, name, cycle, facts)
                continue
            if cycle % 7 == 0 and name == "audit":
                emit(
                    "proposal_rejected",
                    cycle=cycle,
                    suggestor=name,
                    key="evaluations",
                    id=fid,
                    reason="confidence 0.20 is below the gate's minimum 0.50",
                )
                continue
            facts += 1
            emit(
                "fact_promoted",
                cycle=cycle,
                suggestor=name,
                key="evaluations",
                id=fid,
                gate="auto",
                logical_time=facts,
                data={"score": cycle % 10, "by": name},
                content=f"{name} judged case {cycle}",
                confidence=0.8,
                source=f"{name}@bench",
                model_id="gpt-test",
                account="main",
            )
        now[0] = max(ends) + 0.001
        emit(
            "cycle_finished",
            now[0],
            cycle=cycle,
            promoted=len(SUGGESTORS),
            dirty_keys=["evaluations"],
            facts=facts,
            model_calls=calls,
            input_tokens=tokens,
            output_tokens=0,
        )
    emit(
        "run_finished",
        now[0],
        now[0],
        cycles=cycle,
        stop_reason="converged",
        facts=facts,
        error=None,
    )
    with path.open("w", encoding="utf-8") as stream:
        for line in lines:
            stream.write(json.dumps(line, separators=(",", ":")) + "\n")
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="copy the report here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        trace, html = Path(folder) / "trace.jsonl", Path(folder) / "report.html"
        count = synthetic_trace(trace, args.events)
        print(f"trace: {count} events, {trace.stat().st_size / 1e6:.1f} MB")
        # The same trace, one proposed fact's content holding what a page shows escaped
        # (a regex's \b, a BEL): the pages rewrite their data's JSON text then.
        escaped = Path(folder) / "escaped.jsonl"
        escaped.write_text(_one_escaped_fact(trace.read_text(encoding="utf-8")), "utf-8")
        best, best_escaped = float("inf"), float("inf")
        for _ in range(args.repeat):  # interleaved
            best = min(best, _report_seconds(trace, html))
            best_escaped = min(best_escaped, _report_seconds(escaped, Path(folder) / "e.html"))
        size = html.stat().st_size / 1e6
        if args.keep:
            shutil.copyfile(html, args.keep)
    print(
        f"the same trace with one fact holding a control character: {best_escaped:.2f} s, "
        f"{best_escaped / best:.2f} x"
    )
    print(f"report seconds for {args.events // 1000}k events: {best:.2f}  html MB: {size:.1f}")


def _report_seconds(trace: Path, html: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "converge_dsl", "report", str(trace), "-o", str(html)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def _one_escaped_fact(text: str) -> str:
    """`text` with the first proposal's content replaced by one holding `\b` and a BEL."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        event = json.loads(line)
        if isinstance(event.get("content"), str):
            event["content"] = "re.compile(r'\\bseat\\b') rang \x07"
            lines[index] = json.dumps(event) + "\n"
            break
    else:
        raise SystemExit("the synthetic trace holds no content to change")
    return "".join(lines)


if __name__ == "__main__":
    main()
