"""`converge-dsl diff A B [--ignore SECTION]... [--format text|json|html] [-o PATH]`: what changed.

A and B are two run results (`converge-dsl run --format json`) or two batch
results files (`run --cases CASES --out RESULTS.jsonl`). For run results:
the facts added, removed and changed (content, confidence, data by JSON
path), the stop reasons and the usage counts that differ. For results files:
the cases matched by id (`#INDEX` for a case without one), each case's diff,
and the cases only in A and only in B. `--ignore usage,stop-reason,confidence`
(repeatable, comma-separated) leaves those sections out of the comparison, in
every format. `--format html` writes a
self-contained page, A beside B, filterable. Exit codes: 0 the same; 1 they
differ; 2 a results file has a line that is not a result line, or names a
case twice (located errors, CD816-CD817); 3 usage error (a file that is
neither, one of each kind, an unknown section to ignore, or an `-o` that is A
or B, a link, a device or in a missing folder: `cli._output`, checked before
anything is read).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge_dsl import codes
from converge_dsl.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, CommandIO
from converge_dsl.cli._inputs import json_file
from converge_dsl.errors import UsageError

if TYPE_CHECKING:
    from converge_dsl.cli._output import CommandOutput
    from converge_dsl.diagnostics import Diagnostic
    from converge_dsl.pipetest import CaseResultLine


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="a run result (run --format json) or results file")
    parser.add_argument("b", metavar="B", help="the run result or results file to compare with A")
    parser.add_argument(
        "--format", choices=("text", "json", "html"), default="text", help="output format"
    )
    parser.add_argument("-o", "--output", metavar="PATH", help="write the output here")
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="SECTION",
        help="leave a section out of the comparison: usage, stop-reason or confidence "
        "(repeat the option or separate them with commas)",
    )


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.cli._output import command_output

    reads = [(args.a, "A, a file compared"), (args.b, "B, a file compared")]
    with command_output(io, args.output, "-o", "diff", reads) as output:
        return _compare(args, io, output)


def _compare(args: argparse.Namespace, io: CommandIO, output: CommandOutput) -> int:
    from converge_dsl.errors import PipelineInvalid
    from converge_dsl.pipetest import diff_batches, diff_results, read_batch_results

    ignore = _sections(args.ignore)
    a_text, b_text = _batch_text(args.a), _batch_text(args.b)
    if (a_text is None) != (b_text is None):
        batch_file = args.a if a_text is not None else args.b
        raise UsageError(
            f"{batch_file} is a batch results file and the other a run result",
            hint="compare two run results (run --format json) or two results files "
            "(run --cases CASES --out RESULTS.jsonl)",
            code=codes.FILE_UNREADABLE,
        )
    if a_text is not None and b_text is not None:
        problems: list[Diagnostic] = []
        sides: list[tuple[CaseResultLine, ...]] = []
        for text, named in ((a_text, args.a), (b_text, args.b)):
            try:
                sides.append(read_batch_results(text, named))
            except PipelineInvalid as exc:
                problems.extend(exc.diagnostics)
        if problems:
            from converge_dsl.cli._render import render

            json_out = args.format == "json"
            render(
                problems,
                "json" if json_out else "human",
                io.stdout if json_out else io.stderr,
                files=2,
                color=not json_out and io.style(io.stderr).color,
            )
            return EXIT_INVALID
        found: Any = diff_batches(sides[0], sides[1], ignore)
        kind = "batch"
    else:
        found = diff_results(_result(args.a), _result(args.b), ignore)
        kind = "run"
    if args.format == "json":
        text = json.dumps(found.as_json(), indent=2) + "\n"
    elif args.format == "html":
        from converge_dsl.pipetest import render_diff_html

        text = render_diff_html(found.as_json(), kind, args.a, args.b)
    else:
        from converge_dsl.frontend import terminal_safe

        text = terminal_safe(found.text())  # the results' keys and values are the runs'
    output.write(text)
    return EXIT_OK if found.same else EXIT_FAILURE


def _sections(given: list[str]) -> frozenset[str]:
    """The sections `--ignore` names (each option a comma-separated list); an unknown one is
    a `UsageError` with the closest known name."""
    import difflib

    from converge_dsl.diagnostics import suggestion
    from converge_dsl.pipetest import DIFF_SECTIONS

    names = [n.strip() for option in given for n in option.split(",") if n.strip()]
    for name in names:
        if name not in DIFF_SECTIONS:
            guess = difflib.get_close_matches(name.replace("_", "-"), DIFF_SECTIONS, n=1)
            raise UsageError(
                f"--ignore: {name!r} is not a section of a diff",
                hint=(suggestion(guess[0]) + " " if guess else "")
                + "the sections: "
                + ", ".join(DIFF_SECTIONS),
                code=codes.ARGUMENTS_REFUSED,
            )
    return frozenset(names)


def _batch_text(named: str) -> str | None:
    """The text of `named` when it is a batch results file, else None (read as a run
    result later, so that its errors are a run result's)."""
    from converge_dsl._reading import open_regular, read_failure, read_text
    from converge_dsl.pipetest import is_batch_results

    path = Path(named)
    try:
        with open_regular(path, "run result or results file") as handle:  # a FIFO is refused
            head = handle.read(16)
    except OSError:
        return None  # reported by the run result's reader
    if not is_batch_results(head.decode("utf-8", "replace")):
        return None
    try:
        return read_text(path, "results file")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"results file {named} is not UTF-8 text (byte {exc.start})", code=codes.FILE_UNREADABLE
        ) from None
    except OSError as exc:
        raise read_failure(exc, path, "results file") from None


def _result(named: str) -> dict[str, Any]:
    data = json_file(Path(named), "run result")
    if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
        raise UsageError(
            f"{named} is not a run result",
            hint="give run results (run --format json) or results files (run --cases --out)",
            code=codes.FILE_UNREADABLE,
        )
    return data
