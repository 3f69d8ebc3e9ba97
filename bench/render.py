"""Render benchmark: the CPU of each template render of one support-triage case, alone.

Run `python bench/render.py [--rounds N]`. It runs one case of
`pipelines/support-triage.yaml` on its scripted model (the case `bench/batch.py`
runs 2,000 times), recording the template and scope of each of its 20 renders
(templates, `when` and `data` expressions, the pack's checks), then renders
each again and again, alone, and prints the CPU microseconds of one render
(best of `--rounds`, default 5), one line per render, and last (one line; L
the one-minute load average):

    renders per case: N  CPU per case: T us  (load L)

The sandbox's shortcuts that are not the template's own work, measured with
this bench before and after them in turn on one machine: a plain dict's items
and built-in indexing without Jinja's attribute rules, tests that take no
context called without Jinja's bookkeeping, a lone string or number sized
without the walk, a filter with no check called with its own arguments and
without Jinja's async wrapper, a comparison charged through `spend`'s inlined
path: 720 us to 516 us per case (load 7.3 and 7.0; `bench/batch.py` gives the
whole case's CPU). Then, a render's context sharing its template's evaluation
context and globals' names, a test charged and called without its guard's extra
call, a frozen JSON object's items read as attributes without a failed lookup:
505-509 us to 451-453 us (load 13.3-13.9, runs of each tree in turn).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from converge_dsl.batch import BatchOptions, run_batch
from converge_dsl.compiler._sources import SOURCES
from converge_dsl.sandbox import _templating

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "support-triage.yaml"


def recorded_renders() -> tuple[list[tuple[Any, dict[str, Any]]], dict[int, str]]:
    """The (template, scope) of every render of one case, in order, and the text of
    each template the pipeline compiled (by the template's id)."""
    seen: list[tuple[Any, dict[str, Any]]] = []
    run = _templating._run

    def recording(template: Any, scope: dict[str, Any]) -> Any:
        seen.append((template, dict(scope)))
        return run(template, scope)

    _templating._run = recording  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp, SOURCES.recording() as used:
            cases = Path(tmp) / "cases.jsonl"
            cases.write_text('{"id": 1}\n')
            out = Path(tmp) / "out.jsonl"
            run_batch(BatchOptions(pipeline=PIPELINE, cases=cases, out=out, executor="local"))
    finally:
        _templating._run = run  # type: ignore[assignment]
    texts = {id(getattr(s.compiled, "_template", s.compiled)): s.text for s in used.values()}
    return seen, texts


def cpu_us(template: Any, scope: dict[str, Any], rounds: int, number: int = 2_000) -> float:
    """The best CPU microseconds of one render over `rounds` rounds of `number`."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(number):
            _templating._run(template, scope)
        best = min(best, time.process_time() - start)
    return best / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    renders, texts = recorded_renders()
    total = 0.0
    for template, scope in renders:
        us = cpu_us(template, scope, args.rounds)
        total += us
        text = texts.get(id(template), "(a pack's check)").replace("\n", " ")
        print(f"{us:6.1f} us  {text[:90]}")
    print(
        f"renders per case: {len(renders)}  CPU per case: {total:.0f} us  "
        f"(load {os.getloadavg()[0]:.2f})"
    )


if __name__ == "__main__":
    main()
