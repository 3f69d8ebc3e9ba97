"""`converge-dsl trace expand TRACE REDUCTION_ID`: print the turns a compaction cleared.

A trace is JSONL, one event per line with a `type`. Every compaction writes an
`agent_span_cleared` event holding the cleared messages verbatim; this command
finds the one with the given reduction id and prints its turns (`--format
json` prints the cleared turns). Exit codes: 0, 1 not found, 3 usage error.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from converge_dsl.errors import ConvergeError, UsageError

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO

SPAN_CLEARED = "agent_span_cleared"


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    expand = sub.add_parser("expand", help="print the turns cleared by one compaction")
    expand.add_argument("trace", type=Path, help="the JSONL trace of a run (run --trace)")
    expand.add_argument("reduction_id", help="the reduction id (see agent_compaction events)")
    expand.add_argument("--format", choices=("human", "json"), default="human")


class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["text", "tool_call", "tool_result"]
    text: str = ""
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    output: str = ""
    is_error: bool = False


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    parts: list[_Part]


class _Turn(BaseModel):
    model_config = ConfigDict(extra="allow")

    turn: int
    messages: list[_Message]


class _SpanEvent(BaseModel):
    """The fields of an `agent_span_cleared` line this command reads (others are kept)."""

    model_config = ConfigDict(extra="allow")

    reduction_id: str
    suggestor: str
    cycle: int
    first_turn: int
    last_turn: int
    turns: list[_Turn]


def _where(error: ValidationError) -> str:
    first = error.errors()[0]
    path = ".".join(str(p) for p in first["loc"])
    return f"{path}: {first['msg']}" if path else str(first["msg"])


def _events(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, decoded JSON) of each non-blank line; unreadable input is a UsageError."""
    try:
        with path.open("rb") as stream:
            for number, raw in enumerate(stream, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise UsageError(
                        f"{path}:{number}: not UTF-8 text (byte {exc.start} of the line)",
                        hint="give the JSONL file written by `converge-dsl run --trace`",
                    ) from None
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except RecursionError:
                    raise UsageError(f"{path}:{number}: JSON nested too deeply") from None
                except ValueError:
                    raise UsageError(f"{path}:{number}: not a JSON line") from None
    except OSError as exc:
        raise UsageError(f"cannot read trace {str(path)!r}: {exc.strerror or exc}") from None


def find_cleared(path: Path, reduction_id: str) -> dict[str, Any]:
    """The `agent_span_cleared` event of `reduction_id` in the trace at `path`.

    The event is checked for the shape this command reads; a malformed one is a
    `UsageError` naming its line.
    """
    seen: list[str] = []
    for number, event in _events(path):
        if not isinstance(event, dict) or event.get("type") != SPAN_CLEARED:
            continue
        if event.get("reduction_id") != reduction_id:
            seen.append(str(event.get("reduction_id")))
            continue
        try:
            _SpanEvent.model_validate(event)
        except ValidationError as exc:
            raise UsageError(
                f"{path}:{number}: malformed {SPAN_CLEARED} event ({_where(exc)})",
                hint="the trace was edited or damaged; expand a trace written by "
                "`converge-dsl run --trace`",
            ) from None
        return event
    from converge_dsl.diagnostics import did_you_mean

    guess = did_you_mean(reduction_id, seen)
    raise ConvergeError(
        f"no cleared span {reduction_id!r} in {path.name}",
        hint=f"did you mean {guess!r}?"
        if guess
        else (
            f"reductions in this trace: {', '.join(seen)}"
            if seen
            else "this trace has no compaction"
        ),
    )


def _part(part: dict[str, Any]) -> str:
    kind = part.get("type")
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "tool_call":
        args = json.dumps(part.get("input", {}), ensure_ascii=False, sort_keys=True)
        return f"-> {part.get('name')}({args})  [call {part.get('id')}]"
    flag = " (error)" if part.get("is_error") else ""
    return f"<- result of {part.get('call_id')}{flag}: {part.get('output', '')}"


def render_span(event: dict[str, Any]) -> str:
    first, last = event.get("first_turn"), event.get("last_turn")
    lines = [
        f"{event.get('reduction_id')}: turns {first}-{last} of agent {event.get('suggestor')} "
        f"(cycle {event.get('cycle')})"
    ]
    for turn in event.get("turns", []):
        lines.append(f"--- turn {turn.get('turn')}")
        for message in turn.get("messages", []):
            role = message.get("role", "?")
            for part in message.get("parts", []):
                body = _part(part).replace("\n", "\n    ")
                lines.append(f"[{role}] {body}")
    return "\n".join(lines) + "\n"


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    event = find_cleared(args.trace, args.reduction_id)
    if args.format == "json":
        io.stdout.write(json.dumps(event.get("turns", []), indent=2, ensure_ascii=False) + "\n")
    else:
        io.stdout.write(render_span(event))
    return 0
