"""What a batch run shows: live progress on standard error and the summary at the end.

On a terminal, a rich progress bar: cases done of all, rate, ETA, and the
count of each stop reason so far. Elsewhere, a plain line each time another
tenth of the batch is done (and at the end). The summary is a table (rich on
a terminal, plain text otherwise) or, with `--format json`, one JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from converge_dsl.cli._terminal import Style, console

if TYPE_CHECKING:
    from converge_dsl.batch import BatchSummary, CaseResult

# Plain progress: a line each time this fraction more of the batch is done.
PLAIN_STEP = 0.1


def _stops(summary: BatchSummary) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in sorted(summary.stops.items()))


class Progress:
    """Live progress of a batch (see the module docstring); nothing at all when `quiet`."""

    def __init__(
        self, stream: TextIO, style: Style, environ: Mapping[str, str], *, quiet: bool = False
    ) -> None:
        self._stream = stream
        self._style = style
        self._environ = environ
        self._live = style.live
        self._quiet = quiet
        self._bar: Any = None
        self._task: Any = None
        self._next_plain = 0

    def start(self, summary: BatchSummary) -> None:
        todo = summary.total - summary.skipped
        if summary.skipped and not self._quiet:
            self._stream.write(f"resuming: {summary.skipped} case(s) already in the results\n")
        if self._live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("cases"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[stops]}"),
                console=console(self._stream, self._style, self._environ),
            )
            self._task = self._bar.add_task("cases", total=todo, rate="", stops="")
            self._bar.start()
        self._next_plain = max(1, int(todo * PLAIN_STEP))

    def update(self, result: CaseResult, summary: BatchSummary) -> None:
        rate = summary.run / summary.seconds if summary.seconds > 0 else 0.0
        if self._bar is not None:
            self._bar.update(
                self._task, completed=summary.run, rate=f"{rate:.1f}/s", stops=_stops(summary)
            )
            return
        todo = summary.total - summary.skipped
        if self._quiet:
            return
        if summary.run >= self._next_plain or summary.run == todo:
            self._next_plain = summary.run + max(1, int(todo * PLAIN_STEP))
            self._stream.write(f"{summary.run}/{todo} cases, {rate:.1f}/s ({_stops(summary)})\n")

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def summary_rows(summary: BatchSummary, out: Path) -> list[tuple[str, str]]:
    """The summary as (label, value) rows."""
    rate = summary.run / summary.seconds if summary.seconds > 0 else 0.0
    rows = [
        ("cases", str(summary.total)),
        ("already done (--resume)", str(summary.skipped)),
        ("run", str(summary.run)),
    ]
    rows += [(f"  {reason}", str(count)) for reason, count in sorted(summary.stops.items())]
    rows += [
        ("not converged", str(summary.failed)),
        ("model calls", str(summary.model_calls)),
        *([("cached answers", str(summary.cached_calls))] if summary.cached_calls else []),
        ("tokens", str(summary.tokens)),
        ("seconds", f"{summary.seconds:.2f}"),
        ("cases/s", f"{rate:.1f}"),
        ("results", str(out)),
    ]
    return rows


def summary_table(
    summary: BatchSummary, out: Path, stream: TextIO, style: Style, environ: Mapping[str, str]
) -> None:
    """The summary as a table: rich on a terminal (`style.terminal`), aligned plain text
    otherwise."""
    rows = summary_rows(summary, out)
    if style.terminal:
        from rich.table import Table

        table = Table(title="batch summary", show_header=False)
        table.add_column("")
        table.add_column("", justify="right")
        for label, value in rows:
            table.add_row(label, value)
        console(stream, style, environ).print(table)
        return
    width = max(len(label) for label, _ in rows)
    stream.write("".join(f"{label:<{width}}  {value}\n" for label, value in rows))


def summary_json(summary: BatchSummary) -> dict[str, Any]:
    """The summary as one JSON object (`--format json`)."""
    return {
        "cases": summary.total,
        "skipped": summary.skipped,
        "run": summary.run,
        "stop_reasons": dict(sorted(summary.stops.items())),
        "not_converged": summary.failed,
        "model_calls": summary.model_calls,
        "cached_calls": summary.cached_calls,
        "tokens": summary.tokens,
        "seconds": round(summary.seconds, 3),
    }


class CacheExplainer:
    """`--explain-cache` with `--cases`: each case's calls through the answer cache, kept as
    the cases finish and shown in case order once the batch is done (docs/cache.md).

    Human: one total line, then a block per case that missed (its misses and why); cases
    answered wholly from the cache are in the total only. JSON: every case with its calls.
    """

    def __init__(self) -> None:
        self._cases: list[CaseResult] = []

    def add(self, result: CaseResult) -> None:
        self._cases.append(result)

    def write(self, stream: TextIO, *, as_json: bool) -> None:
        cases = sorted(self._cases, key=lambda result: result.index)
        if as_json:
            document = {
                "cases": [
                    {"index": c.index, "id": c.id, "calls": [dict(call) for call in c.cache_calls]}
                    for c in cases
                ]
            }
            stream.write(json.dumps(document, indent=2) + "\n")
            return
        calls = [call for case in cases for call in case.cache_calls]
        hits = sum(1 for call in calls if call["outcome"] == "hit")
        stream.write(
            f"answer cache: {len(calls)} call(s) in {len(cases)} case(s): "
            f"{hits} hit(s), {len(calls) - hits} miss(es)\n"
        )
        for case in cases:
            missed = [call for call in case.cache_calls if call["outcome"] != "hit"]
            if not missed:
                continue
            named = "" if case.id is None else f" (id {json.dumps(case.id)})"
            stream.write(
                f"  case {case.index}{named}: {len(case.cache_calls) - len(missed)} hit(s), "
                f"{len(missed)} miss(es)\n"
            )
            for call in missed:
                stream.write(
                    f"    miss  {call['suggestor'] or '-'} (model {call['model']}, "
                    f"key {str(call['key'])[:16]})\n"
                )
                why = call.get("why")
                if why:
                    stream.write("".join(f"          {line}\n" for line in str(why).split("\n")))
