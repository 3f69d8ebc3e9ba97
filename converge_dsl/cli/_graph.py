"""`converge-dsl graph PIPELINE`: draw the compiled pipeline; nothing runs.

Suggestors, context keys (with their schemas), models and packs as nodes;
dependencies and targets as edges; styled by suggestor kind; invariants
listed; keys that can never hold a fact and suggestors that can never fire
marked (docs/architecture.md §15). `--format mermaid|dot|json|html` (default
mermaid); `-o FILE` writes the file instead of standard output, as `cli._output`
writes a command's output, refusing an existing file that is not a graph
converge-dsl wrote.

An invalid pipeline is reported as `validate` reports it, exit 2: under
`--format json` as `validate --format json` (on standard output, as every
command's failure under `--format json` is JSON there: `cli`), else on
standard error in human form. Exit codes: 0, 2 invalid pipeline, 3 usage error (inputs, an
output refused), 1 an output that cannot be written.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from converge_dsl.cli._inputs import add_input_arguments, parse_inputs

if TYPE_CHECKING:
    from converge_dsl.cli import CommandIO

FORMATS = ("mermaid", "dot", "json", "html")


def configure(parser: argparse.ArgumentParser) -> None:
    from converge_dsl.cli._validate import add_allow_root

    parser.add_argument("pipeline", type=Path, metavar="PIPELINE", help="the pipeline YAML file")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="mermaid",
        help="mermaid (default), dot (Graphviz), json, or html (one self-contained page)",
    )
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the graph to FILE")
    add_input_arguments(parser)
    add_allow_root(parser)


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl._files import user_roots
    from converge_dsl.cli._output import command_output
    from converge_dsl.graph import graph_pipeline, recognise, render

    reads = [(args.pipeline, "the pipeline")]
    with command_output(io, args.output, "--output", "graph", reads, recognise=recognise) as output:
        graph = graph_pipeline(
            args.pipeline,
            inputs=parse_inputs(args),
            roots=user_roots(args.allow_root, io.environ),
            on_fetch=io.note,
            env=io.environ,
        )
        output.write(render(graph, args.format))
    return 0
