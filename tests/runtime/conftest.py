"""What the runtime's tests share."""

from __future__ import annotations

import json
from pathlib import Path


def steady_timings(trace: Path) -> None:
    """Make the clock readings of `trace` the same on every machine: event number n at n
    milliseconds, but each cycle's start 40 ms after the last event, and each duration
    half a millisecond (executions as short as a real run's against the whole run), so a
    page drawn from it is laid out alike however loaded the machine that ran it was."""
    events, at = [], 0.0
    for line in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("timing"):
            at += 0.04 if event["type"] == "cycle_started" else 0.001
            event["timing"]["at"] = at
            if event["timing"].get("duration_s") is not None:
                event["timing"]["duration_s"] = 0.0005
        events.append(json.dumps(event))
    trace.write_text("\n".join(events) + "\n", encoding="utf-8")
