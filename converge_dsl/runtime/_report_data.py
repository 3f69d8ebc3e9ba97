"""A run trace, read with bounds, as the compact data an HTML report embeds.

`report_data(path)` reads a `--trace` JSONL file line by line (no line may be
longer than `MAX_LINE_BYTES`) and folds its events into plain lists of rows
(arrays, not objects: the page's JSON stays small for 100,000 events).
Proposals held for a human are one `hitl` row each (cycle, suggestor, key,
id, why it waited, decision `pending` / `approved` / `rejected`): a
`proposal_pending` adds it, a later `proposal_decided` (a resumed run) sets
its decision, or adds it when the trace is the resumed run's alone. Times
are seconds from the run's start, rounded to microseconds. Long texts are cut
(`MAX_TEXT`). Event types it does not know are skipped (a newer writer); a
line that is not JSON, not an event object, or an event missing a field the
report reads is a `UsageError` naming `file:line`; but a last line cut short (no
line break: the run was killed while it was written) ends the trace, and
`meta.cut_short` holds its number for the page to say.

Source excerpts of the suggestors come from the trace alone: the run wrote
them on its `run_started` line (`excerpts`, cut from the text it loaded).
The report reads no file but the trace (docs/architecture.md §12), whatever
path a span names (`/etc/passwd`, `../../secret`); a suggestor without an
excerpt in the trace (a trace from an older converge-dsl, or an edited one)
gets none, and `why` says so. So do their kinds (`kinds`, one per name, None
for a name that is not a suggestor): the page draws each execution in its
kind's colours, the ones the graph draws it in (`_report_html` adds them).
`meta.cycles` is the one count of cycles the header and the Cycles card show:
the run's own (`run_finished`), else the highest cycle the trace names.
`meta.suggestor_started` is true when the trace has a `suggestor_started`
(the timeline of a trace cut before any execution finished says so).
`meta.pipeline` is the pipeline's name as the run's first fact names it (its
`source`, `suggestor@pipeline`: the pipeline's `name`, which the graph page's
title and the CLI show too), else None (the page then names the trace's file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from typing import Any

from converge_dsl import codes
from converge_dsl._long_lines import cut_line
from converge_dsl._reading import open_regular, read_failure
from converge_dsl.errors import UsageError

from ._trace import MAX_EXCERPT_LINES

MAX_LINE_BYTES = 8 * 1024 * 1024
KIND_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")  # a kind name a trace may give
MAX_TEXT = 400
NO_EXCERPT = (
    "no excerpt: the trace does not hold this suggestor's source "
    "(a report shows only what the run recorded; it reads no other file)"
)
# The row lists of the page's data, one per section.
TABLES = (
    "ex", "mc", "facts", "rej", "hitl", "usage", "inv",
    "turns", "contrib", "tools", "comp", "sum", "fallback", "agent_end",
)  # fmt: skip
_HINT = "give the JSONL file written by `converge-dsl run --trace`"


def bounded_lines(
    path: Path, cut_short: Callable[[int], object] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, event object) of each non-blank line, each line read with a bound.

    A last line with no line break that is not JSON was cut short (the run was killed
    while the writer wrote it): with `cut_short`, it is told the line's number and the
    reading ends there; without, it is an error like any other line."""
    try:
        stream = open_regular(path, "trace")
    except OSError as exc:
        raise read_failure(exc, path, "trace") from None
    with stream:
        number = 0
        while True:
            try:
                raw = stream.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise read_failure(exc, path, "trace") from None
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise UsageError(
                    f"{path}:{number}: line longer than {MAX_LINE_BYTES // 2**20} MiB",
                    hint=_HINT,
                    code=codes.FILE_UNREADABLE,
                )
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except RecursionError:
                raise UsageError(
                    f"{path}:{number}: JSON nested too deeply",
                    hint=_HINT,
                    code=codes.FILE_UNREADABLE,
                ) from None
            except ValueError as exc:  # UnicodeDecodeError too
                if cut_short is not None and not raw.endswith(b"\n"):  # the last line
                    cut_short(number)
                    return
                what = (
                    "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "not a JSON line"
                )
                raise UsageError(
                    f"{path}:{number}: {what}", hint=_HINT, code=codes.FILE_UNREADABLE
                ) from None
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                raise UsageError(
                    f"{path}:{number}: not a trace event (an object with a `type`)",
                    hint=_HINT,
                    code=codes.FILE_UNREADABLE,
                )
            yield number, event


def _cut(text: Any) -> str:
    value = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "\u2026"


def _num(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a whole number, got {value!r}")
    return value


def _timing(event: dict[str, Any]) -> tuple[float, float] | None:
    """(at, duration) of the event's `timing`, if it has one."""
    timing = event.get("timing")
    if not isinstance(timing, dict):
        return None
    duration = timing.get("duration_s")
    return _num(timing["at"]), 0.0 if duration is None else _num(duration)


class _Fold:
    """The report's data, built one event at a time."""

    def __init__(self) -> None:
        self.origin: float | None = None
        self.names: dict[str, int] = {}
        self.spans: dict[str, dict[str, Any]] = {}
        self.meta: dict[str, Any] = {}
        self.excerpts: dict[str, str] = {}
        self.kinds: dict[str, str] = {}  # suggestor -> kind name (`run_started`'s `kinds`)
        self.last_cycle = 0  # the highest cycle an event names
        self.running: dict[str, int] = {}  # suggestor -> cycle of its current execution
        self.held: dict[tuple[str, str], list[Any]] = {}  # (key, id) -> its `hitl` row
        self.call_turns: dict[int, int | None] = {}  # call number -> the agent turn it served
        self.rows: dict[str, list[list[Any]]] = {name: [] for name in TABLES}
        self.handlers = self._handlers()

    def cut_short(self, number: int) -> None:
        """The trace's last line, `number`, was cut short: the page says so."""
        self.meta["cut_short"] = number

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], None]]:
        """Event type -> what folds it in."""
        return {
            "run_started": self._run_started,
            "suggestor_started": self._suggestor_started,
            "suggestor_finished": self._suggestor_ended,
            "suggestor_failed": self._suggestor_ended,
            "model_call_started": self._model_call_started,
            "model_call_finished": self._model_call,
            "fact_promoted": self._fact,
            "proposal_rejected": lambda e: self._proposal("rej", e),
            "proposal_pending": lambda e: self._human(e, "pending"),
            "proposal_decided": lambda e: self._human(e, str(e["decision"])),
            "cycle_finished": self._cycle_finished,
            "invariant_checked": self._invariant,
            "run_finished": self._run_finished,
            "agent_turn_started": lambda e: self._agent("turns", e, "turn", "estimated_tokens"),
            "agent_contributor_fired": lambda e: self._agent(
                "contrib", e, "turn", "contributor", "kind", "role", "persist", "chars", "text"
            ),
            "agent_tool_called": lambda e: self._agent("tools", e, "turn", "tool", "is_error"),
            "agent_compaction": lambda e: self._agent(
                "comp",
                e,
                "turn",
                "level",
                "reduction_id",
                "first_turn",
                "last_turn",
                "tokens_before",
                "tokens_after",
                "replacement",
            ),
            "agent_summary_taken": lambda e: self._agent(
                "sum", e, "reduction_id", "model_id", "sha256", "chars"
            ),
            "agent_summary_fallback": lambda e: self._agent(
                "fallback", e, "reduction_id", "reason", "detail"
            ),
            "agent_finished": lambda e: self._agent("agent_end", e, "status", "turns", "proposals"),
        }

    def name(self, suggestor: Any) -> int:
        if suggestor is None:
            return -1
        if not isinstance(suggestor, str):
            raise TypeError(f"suggestor is not a string: {suggestor!r}")
        return self.names.setdefault(suggestor, len(self.names))

    def rel(self, at: float) -> float:
        if self.origin is None:
            self.origin = at
        return round(at - self.origin, 6)

    def add(self, event: dict[str, Any]) -> None:
        span, suggestor = event.get("span"), event.get("suggestor")
        if isinstance(span, dict) and isinstance(suggestor, str) and suggestor not in self.spans:
            if not isinstance(span.get("file"), str) or type(span.get("line")) is not int:
                raise TypeError("its span has no file name and line number")
            self.spans[suggestor] = span
        cycle = event.get("cycle")
        if type(cycle) is int and cycle > self.last_cycle:
            self.last_cycle = cycle
        handler = self.handlers.get(event["type"])
        if handler is not None:
            handler(event)

    def _run_started(self, event: dict[str, Any]) -> None:
        excerpts = event.get("excerpts")
        if isinstance(excerpts, dict):
            self.excerpts.update(
                (name, text) for name, text in excerpts.items() if isinstance(text, str)
            )
        kinds = event.get("kinds")
        if isinstance(kinds, dict):
            self.kinds.update(
                (name, kind)
                for name, kind in kinds.items()
                if isinstance(kind, str) and KIND_NAME.fullmatch(kind)
            )
        timing = _timing(event)
        if timing is not None:
            self.rel(timing[0])
        self.meta.update(
            started=event.get("time"),
            suggestors=_int(event["suggestors"]),
            budget=event.get("budget"),
        )

    def _suggestor_started(self, event: dict[str, Any]) -> None:
        self.running[event["suggestor"]] = _int(event["cycle"])
        self.meta["suggestor_started"] = True

    def _suggestor_ended(self, event: dict[str, Any]) -> None:
        timing = _timing(event)
        at, duration = timing if timing is not None else (0.0, 0.0)
        failed = event["type"] == "suggestor_failed"
        self.rows["ex"].append(
            [
                self.name(event["suggestor"]),
                _int(event["cycle"]),
                self.rel(at - duration),
                self.rel(at),
                0 if failed else _int(event["proposals"]),
                _cut(event["error"]) if failed else None,
            ]
        )

    def _model_call_started(self, event: dict[str, Any]) -> None:
        turn = event.get("turn")
        self.call_turns[_int(event["call"])] = None if turn is None else _int(turn)

    def _model_call(self, event: dict[str, Any]) -> None:
        """One `mc` row: ..., the call's purpose (`turn`, `summary`, `answer`, `repair`; None in an
        older trace) and its agent turn."""
        at, duration = _timing(event) or (0.0, 0.0)
        suggestor = event["suggestor"]
        purpose = event.get("purpose")
        if purpose is not None and purpose not in ("turn", "summary", "answer", "repair"):
            raise ValueError(f"unknown purpose {purpose!r}")
        self.rows["mc"].append(
            [
                _int(event["call"]),
                self.name(suggestor),
                # An answer from the answer cache is marked where the model is named.
                str(event["model"]) + (" (cached)" if event.get("cached") else ""),
                self.rel(at - duration),
                self.rel(at),
                str(event["status"]),
                _int(event["attempts"]),
                _int(event["input_tokens"]),
                _int(event["output_tokens"]),
                event["status_code"],
                self.running.get(suggestor),
                purpose,
                self.call_turns.get(_int(event["call"])),
            ]
        )

    def _fact(self, event: dict[str, Any]) -> None:
        data = event.get("data")
        self.rows["facts"].append(
            [
                str(event["key"]),
                str(event["id"]),
                _cut(event.get("content") or ""),
                None if data is None else _cut(data),
                event.get("confidence"),
                event.get("source"),
                event.get("model_id"),
                event.get("account"),
                self.name(event["suggestor"]),
                _int(event["cycle"]),
                str(event["gate"]),
            ]
        )
        source, by = event.get("source"), f"{event['suggestor']}@"
        if "pipeline" not in self.meta and isinstance(source, str) and source.startswith(by):
            self.meta["pipeline"] = source[len(by) :]
        if event["gate"] == "human":  # a trace older than `proposal_decided` has only this
            row = self._held_row(str(event["key"]), str(event["id"]))
            if row[0] is None:
                row[0], row[1] = _int(event["cycle"]), self.name(event["suggestor"])
                row[5] = "approved"

    def _human(self, event: dict[str, Any], decision: str) -> None:
        """A proposal held for a human: one `hitl` row per (key, id), its decision the latest."""
        if decision not in ("pending", "approved", "rejected"):
            raise ValueError(f"unknown decision {decision!r}")
        row = self._held_row(str(event["key"]), str(event["id"]))
        row[:] = [
            _int(event["cycle"]),
            self.name(event["suggestor"]),
            row[2],
            row[3],
            _cut(event["reason"]),
            decision,
        ]

    def _held_row(self, key: str, fid: str) -> list[Any]:
        row = self.held.get((key, fid))
        if row is None:
            row = self.held[key, fid] = [None, -1, key, fid, "", "pending"]
            self.rows["hitl"].append(row)
        return row

    def _proposal(self, table: str, event: dict[str, Any]) -> None:
        self.rows[table].append(
            [
                _int(event["cycle"]),
                self.name(event["suggestor"]),
                str(event["key"]),
                str(event["id"]),
                _cut(event["reason"]),
            ]
        )

    def _cycle_finished(self, event: dict[str, Any]) -> None:
        timing = _timing(event)
        tokens = (event.get("input_tokens") or 0) + (event.get("output_tokens") or 0)
        self.rows["usage"].append(
            [
                None if timing is None else self.rel(timing[0]),
                _int(event["cycle"]),
                event.get("facts"),
                event.get("model_calls"),
                tokens,
            ]
        )

    def _invariant(self, event: dict[str, Any]) -> None:
        self.rows["inv"].append(
            [_int(event["cycle"]), str(event["invariant"]), bool(event["holds"]), event["message"]]
        )

    def _run_finished(self, event: dict[str, Any]) -> None:
        timing = _timing(event)
        self.meta.update(
            stop_reason=str(event["stop_reason"]),
            cycles=_int(event["cycles"]),
            facts=_int(event["facts"]),
            error=event.get("error"),
            duration=None if timing is None else timing[1],
        )

    @staticmethod
    def _field(event: dict[str, Any], name: str) -> Any:
        value = event[name]
        return _cut(value) if isinstance(value, str) else value

    def _agent(self, table: str, event: dict[str, Any], *fields: str) -> None:
        row: list[Any] = [self.name(event["suggestor"]), _int(event["cycle"])]
        row += [_cut(event.get(f, "")) if f == "text" else self._field(event, f) for f in fields]
        self.rows[table].append(row)


def _cut_excerpt(text: str) -> str:
    """At most `MAX_EXCERPT_LINES` lines, each cut as the trace's writer cuts them
    (`cut_line`): a trace can hold any size."""
    lines = text.splitlines()[:MAX_EXCERPT_LINES]
    return "\n".join(cut_line(line, 1) for line in lines)  # the trace's own cut: kept


def _excerpt(span: dict[str, Any], text: str | None) -> dict[str, Any]:
    """The span's location and the excerpt the trace holds for it (else `why` there is none)."""
    out: dict[str, Any] = {"file": span["file"], "line": span["line"], "text": None}
    if text is None:
        out["why"] = NO_EXCERPT
    else:
        out["text"] = _cut_excerpt(text)
    return out


def report_data(path: Path) -> dict[str, Any]:
    """The report's data for the trace at `path` (see the module docstring)."""
    fold = _Fold()
    seen = 0
    for number, event in bounded_lines(path, cut_short=fold.cut_short):
        seen += 1
        try:
            fold.add(event)
        except (KeyError, TypeError, ValueError) as exc:
            detail = f"no field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise UsageError(
                f"{path}:{number}: malformed {event['type']} event ({detail})",
                hint="the trace was edited or damaged; report a trace written by "
                "`converge-dsl run --trace`",
                code=codes.FILE_UNREADABLE,
            ) from None
    if not seen:
        raise UsageError(
            f"{path}: the trace holds no event", hint=_HINT, code=codes.FILE_UNREADABLE
        )
    names = list(fold.names)
    # One count of cycles for the page: the run's own (`run_finished`), else the last seen.
    fold.meta.setdefault("cycles", fold.last_cycle)
    sources = {name: _excerpt(span, fold.excerpts.get(name)) for name, span in fold.spans.items()}
    # The pipeline's name, which only facts carry (`fold.meta`), else its file's: a run that
    # promoted no fact yet (failed at once, paused, served and still running) has spans.
    files = [span["file"] for span in fold.spans.values()]
    pipeline = PurePath(files[0]).name if files else None
    return {
        "meta": {"trace": path.name, "pipeline": pipeline, "events": seen, **fold.meta},
        "names": names,
        "kinds": [fold.kinds.get(name) for name in names],
        "sources": sources,
        **fold.rows,
    }
