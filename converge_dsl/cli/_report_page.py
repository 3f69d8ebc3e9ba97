"""`converge-dsl report TRACE.jsonl [-o report.html]`: a run trace as one HTML page.

The page is self-contained (no network at view time): a timeline of cycles
and suggestor executions with their model calls, the facts with their data,
provenance and source, the gate's rejections and approvals, the agents, and
the budgets against their limits (see `converge_dsl.runtime.write_report`).
Without `-o` the page is written beside the trace (`TRACE.html`); `-o` follows the
rule of every output (`cli._output`: `/dev/stdout`, `/dev/stderr 2> FILE`, a pipe).
Exit codes:
0, 1 the output could not be written, 3 usage error (a bad trace names its
`file:line`). (Named `_report_page`: a module `_report` would shadow the
package's `_report` function once imported.)
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trace", type=Path, metavar="TRACE", help="the JSONL trace of a run (run --trace)"
    )
    parser.add_argument(
        "-o", "--output", type=Path, metavar="FILE.html", help="where to write the page"
    )


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl._files import OUTPUT_ERRORS
    from converge_dsl.cli._output import command_output, shown
    from converge_dsl.runtime import is_report_line, render_report

    trace: Path = args.trace
    output: Path = args.output or trace.with_suffix(".html")
    option = "-o" if args.output else "report file"
    reads = [(trace, "the trace")]
    with command_output(io, output, option, "report file", reads, recognise=is_report_line) as out:
        page = render_report(trace)
        out.write(page)
    if out.path is not None:  # not standard output, nor a stream the page went to
        size = len(page.encode("utf-8", OUTPUT_ERRORS))
        io.stdout.write(f"wrote {shown(output)} ({size / 1e6:.2f} MB)\n")
    return 0
