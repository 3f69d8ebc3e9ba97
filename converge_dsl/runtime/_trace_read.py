"""Reading a `--trace` file back: its JSON lines, and the events they hold.

The writer (`TraceWriter`) and this reader share one definition of each
event: a line is the event's own model (`converge_dsl.agents.SpanCleared`,
...) plus the envelope of `TraceLine` (`seq`, `span`). A line that does not
decode, or an event that does not fit its model, is a `UsageError` naming its
line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from converge_dsl import codes
from converge_dsl._reading import open_regular, read_failure
from converge_dsl.diagnostics import did_you_mean, suggestion
from converge_dsl.errors import ConvergeError, UsageError

from ._documents import TraceLine

if TYPE_CHECKING:
    from converge_dsl.agents import SpanCleared

# What the writer adds around an event's own fields.
ENVELOPE = frozenset(TraceLine.model_fields) - {"type"}
_FROM_RUN = "give the JSONL file written by `converge-dsl run --trace`"


def read_trace(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, decoded JSON) of each non-blank line; unreadable input is a UsageError."""
    try:
        with open_regular(path, "trace") as stream:
            for number, raw in enumerate(stream, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise UsageError(
                        f"{path}:{number}: not UTF-8 text (byte {exc.start} of the line)",
                        hint=_FROM_RUN,
                        code=codes.FILE_UNREADABLE,
                    ) from None
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except RecursionError:
                    raise UsageError(
                        f"{path}:{number}: JSON nested too deeply", code=codes.FILE_UNREADABLE
                    ) from None
                except ValueError:
                    raise UsageError(
                        f"{path}:{number}: not a JSON line", code=codes.FILE_UNREADABLE
                    ) from None
    except OSError as exc:
        raise read_failure(exc, path, "trace", hint=_FROM_RUN) from None


def _where(error: ValidationError) -> str:
    first = error.errors()[0]
    path = ".".join(str(p) for p in first["loc"])
    return f"{path}: {first['msg']}" if path else str(first["msg"])


def find_cleared_span(path: Path, reduction_id: str) -> SpanCleared:
    """The `agent_span_cleared` event of `reduction_id` in the trace at `path`.

    A malformed event is a `UsageError` naming its line; an unknown id is a
    `ConvergeError` suggesting the nearest one the trace holds.
    """
    from converge_dsl.agents import SpanCleared

    kind = SpanCleared.model_fields["type"].default
    seen: list[str] = []
    for number, event in read_trace(path):
        if not isinstance(event, dict) or event.get("type") != kind:
            continue
        if event.get("reduction_id") != reduction_id:
            seen.append(str(event.get("reduction_id")))
            continue
        fields = {key: value for key, value in event.items() if key not in ENVELOPE}
        try:
            return SpanCleared.model_validate(fields)
        except ValidationError as exc:
            raise UsageError(
                f"{path}:{number}: malformed {kind} event ({_where(exc)})",
                hint="the trace was edited or damaged; expand a trace written by "
                "`converge-dsl run --trace`",
                code=codes.FILE_UNREADABLE,
            ) from None
    guess = did_you_mean(reduction_id, seen)
    raise ConvergeError(
        f"no cleared span {reduction_id!r} in {path.name}",
        hint=suggestion(guess)
        if guess
        else (
            f"reductions in this trace: {', '.join(seen)}"
            if seen
            else "this trace has no compaction"
        ),
        code=codes.ARGUMENTS_REFUSED,
    )
