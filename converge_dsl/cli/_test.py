"""`converge-dsl test [PATH...] [--format human|json|junit] [--update]`.

Runs pipeline test files (`*.test.yaml`, `kind: PipelineTest`; a folder is
searched recursively, no PATH means the working folder). Each file is loaded,
validated against `schemas/pipeline-test.v1.json` and checked like a
pipeline, its pipelines loaded once; then every case runs and its
expectations are checked. A failure prints a located diff (expected vs
actual, at the expectation's file:line:col). `--update` writes the run's
values into failing snapshot expectations (`stop_reason`, `counts`,
`snapshot`), keeping the file's comments; those cases then count as passed.

Exit codes: 0 every case passed; 1 a case failed or could not run; 2 a test
file (or a pipeline or model script it names) is invalid; 3 usage error, and a test
naming as its pipeline a file of another kind of ours (CD818), as `run` given that
file exits.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from converge_dsl.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, CommandIO
from converge_dsl.cli._validate import add_allow_root

if TYPE_CHECKING:
    from converge_dsl.pipetest import CaseReport, TestFile

FORMATS = ("human", "json", "junit")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="test files or folders searched for *.test.yaml (default: the working folder)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="human",
        help="output format: human text with diffs, JSON, or JUnit XML for CI systems",
    )
    parser.add_argument(
        "--update",
        action="store_true",
        help="write the run's values into failing snapshot expectations "
        "(stop_reason, counts, snapshot), keeping comments",
    )
    add_allow_root(parser)


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl import codes
    from converge_dsl.diagnostics import Diagnostic
    from converge_dsl.errors import ConvergeError, PipelineInvalid
    from converge_dsl.frontend import terminal_safe
    from converge_dsl.pipetest import (
        read_test_file,
        render_report,
        run_test_file,
        test_files,
        update_snapshots,
    )

    # Every file is read and checked before any case runs: an invalid one stops all.
    tests: list[TestFile] = []
    invalid: list[Diagnostic] = []
    exit_code = EXIT_INVALID  # 3 (`TestRefused`) when a test names another kind of file
    paths = test_files(args.paths)
    for path in paths:
        try:
            tests.append(read_test_file(path, env=io.environ, allow_roots=args.allow_root))
        except PipelineInvalid as exc:
            invalid.extend(exc.diagnostics)
            exit_code = max(exit_code, exc.exit_code)
    if invalid:
        from converge_dsl.cli._render import render

        # As `validate` reports them (JSON on standard output), counting the files read.
        json_out = args.format == "json"
        render(
            invalid,
            "json" if json_out else "human",
            io.stdout if json_out else io.stderr,
            files=len(paths),
            color=not json_out and io.style(io.stderr).color,
        )
        if args.format == "junit":  # the human text went to standard error
            from converge_dsl.pipetest import render_junit_invalid

            io.stdout.write(render_junit_invalid(invalid))
        return exit_code
    reports: list[CaseReport] = []
    for test in tests:
        reports.extend(run_test_file(test))
    if args.update:
        update = update_snapshots(reports)
        reports = list(update.reports)
        for path, count in update.written.items():
            io.note(f"updated {count} snapshot value(s) in {path}")
        for path, why in update.unwritten:
            error = ConvergeError(
                f"cannot update the snapshots of {path}: {why}",
                hint="the file is as it was and its snapshot failures stay; make it "
                "writable and run --update again, or edit the values by hand",
                code=codes.OUTPUT_REFUSED,
            )
            io.stderr.write(terminal_safe(error.printed()) + "\n")
        for where in update.shared:
            io.stderr.write(
                f"not updated: {where}: the value is shared through a YAML anchor"
                " with other cases; edit it by hand\n"
            )
    io.stdout.write(render_report(reports, args.format, color=io.color))
    return EXIT_OK if all(r.passed for r in reports) else EXIT_FAILURE
