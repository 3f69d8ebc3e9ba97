"""`converge-dsl trace expand TRACE REDUCTION_ID`: print the turns a compaction cleared.

A trace is JSONL, one event per line with a `type`. Every compaction writes an
`agent_span_cleared` event holding the cleared messages verbatim; this command
finds the one with the given reduction id and prints its turns (`--format
json` prints the cleared turns). The turns quote model output and tool
results verbatim, so the human form escapes control characters (a trace
cannot drive the terminal); the JSON form escapes them by JSON's rules.
Exit codes: 0, 1 not found, 3 usage error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from converge_dsl.agents import PartLine, SpanCleared
    from converge_dsl.cli import CommandIO


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(
        dest="action", required=True, metavar="ACTION", help="what to do (each has --help)"
    )
    expand = sub.add_parser("expand", help="print the turns cleared by one compaction")
    expand.add_argument(
        "trace", type=Path, metavar="TRACE", help="the JSONL trace of a run (run --trace)"
    )
    expand.add_argument(
        "reduction_id",
        metavar="REDUCTION_ID",
        help="the reduction id (see agent_compaction events)",
    )
    expand.add_argument(
        "--format",
        choices=("human", "json"),
        default="human",
        help="json: the cleared turns as a JSON list",
    )


def _part(part: PartLine) -> str:
    if part.type == "text":
        return part.text
    if part.type == "tool_call":
        args = json.dumps(part.input, ensure_ascii=False, sort_keys=True)
        return f"-> {part.name}({args})  [call {part.id}]"
    flag = " (error)" if part.is_error else ""
    return f"<- result of {part.call_id}{flag}: {part.output}"


def render_span(event: SpanCleared) -> str:
    """The human form of `event`, with control characters escaped (`terminal_safe`)."""
    from converge_dsl.frontend import terminal_safe

    lines = [
        f"{event.reduction_id}: turns {event.first_turn}-{event.last_turn} of agent "
        f"{event.suggestor} (cycle {event.cycle})"
    ]
    for turn in event.turns:
        lines.append(f"--- turn {turn.turn}")
        for message in turn.messages:
            for part in message.parts:
                body = _part(part).replace("\n", "\n    ")
                lines.append(f"[{message.role}] {body}")
    return terminal_safe("\n".join(lines)) + "\n"


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.runtime import find_cleared_span

    event = find_cleared_span(args.trace, args.reduction_id)
    if args.format == "json":
        turns = [turn.model_dump(mode="json") for turn in event.turns]
        io.stdout.write(json.dumps(turns, indent=2, ensure_ascii=False) + "\n")
    else:
        io.stdout.write(render_span(event))
    return 0
