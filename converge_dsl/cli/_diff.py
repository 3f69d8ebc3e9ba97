"""`converge-dsl diff A B [--format text|json]`: what changed between two run results.

A and B are run-result documents (`converge-dsl run --format json`). Prints
the facts added, removed and changed (content, confidence, data by JSON
path), the stop reasons and the usage counts that differ. Exit codes: 0 the
same; 1 they differ; 3 usage error (a file that is not a run result).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from converge_dsl.cli import EXIT_FAILURE, EXIT_OK, CommandIO
from converge_dsl.cli._inputs import json_file
from converge_dsl.errors import UsageError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="a run result (run --format json)")
    parser.add_argument("b", metavar="B", help="the run result to compare with A")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.pipetest import diff_results

    found = diff_results(_result(args.a), _result(args.b))
    if args.format == "json":
        io.stdout.write(json.dumps(found.as_json(), indent=2) + "\n")
    else:
        io.stdout.write(found.text())
    return EXIT_OK if found.same else EXIT_FAILURE


def _result(named: str) -> dict[str, Any]:
    data = json_file(Path(named), "run result")
    if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
        raise UsageError(
            f"{named} is not a run result", hint="give run results (run --format json)"
        )
    return data
