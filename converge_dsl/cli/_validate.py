"""`converge-dsl validate PATH... [--format human|json|github|sarif] [--strict]`.

PATH may be a file or a folder. In a folder, every `*.yaml`/`*.yml` file
(recursively) is validated as its kind (`_file_kinds.file_kind`: a pipeline, a pack's
`pack.yaml`, a `*.eval.yaml` evaluation, a run configuration), except the files that
load and say another kind of ours at the top (`ModelScript`, `PipelineTest`, an
`Evaluation` or `Pack` of another name), which are skipped with a note on standard
error (how many of each kind; under `--verbose`, each file and what takes it), or that
load as a mapping with neither `apiVersion` nor `kind` (not a converge-dsl file: a CI
workflow); a file that does not load, or has `apiVersion` and no or a misspelled
`kind`, is validated (so its errors are reported). A folder with no pipeline file is a
usage error (`converge_dsl.cli._discovery.pipeline_files`), whose hint names the files
of other kinds it skipped. A walk enters no hidden folder (`.git`, `.venv`), virtual
environment (a folder holding `pyvenv.cfg`) or `node_modules`, follows no link to a
folder, and checks a file reached twice (a link beside it) once. A file named directly
that says another kind of ours than those checked (a pipeline test, a model script) is
refused as `run` refuses it (CD818, exit 3). Packs are read from the
pack cache only (`converge-dsl pack fetch` fills it).
Files a pipeline names must lie inside its folder, or a folder allowed with
`--allow-root DIR` (repeatable) or `CONVERGE_DSL_ALLOW_ROOTS`.
With `--only-pipelines`, a file named directly is checked only when it says
it is a converge-dsl pipeline (an `apiVersion: converge-dsl/...` or `kind:
Pipeline` line, no other tool's `apiVersion` and no other kind): the
pre-commit hook passes every changed
YAML file this way, and other tools' YAML is skipped.
Exit codes: 0 valid; 1 only warnings under `--strict` (notes never fail); 2 errors; 3 usage
error.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from converge_dsl.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, QUIET, VERBOSE, CommandIO
from converge_dsl.cli._render import FORMATS, render


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="pipeline files or folders")
    parser.add_argument("--format", choices=FORMATS, default="human", help="output format")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when there are warnings (notes do not count)"
    )
    parser.add_argument(
        "--only-pipelines",
        action="store_true",
        help="skip the files named that do not say they are converge-dsl pipelines "
        "(for pre-commit: other tools' YAML files)",
    )
    add_allow_root(parser)


def add_allow_root(parser: argparse.ArgumentParser) -> None:
    """`--allow-root DIR` (repeatable): a folder where files a pipeline names may lie."""
    parser.add_argument(
        "--allow-root",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="also allow files the pipeline names (scripts, cassettes) inside DIR; repeatable "
        "(default: the pipeline's folder only, plus CONVERGE_DSL_ALLOW_ROOTS)",
    )


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl._files import user_roots
    from converge_dsl.cli._discovery import check_paths

    checked = check_paths(
        args.paths,
        roots=user_roots(args.allow_root, io.environ),
        only_pipelines=args.only_pipelines,
        env=io.environ,
    )
    for path in checked.files:
        io.detail(f"checked {path}")
    _say_skipped(checked.skipped, io)
    render(
        checked.diagnostics,
        args.format,
        io.stdout,
        sources=checked.sources,
        files=len(checked.files),
        color=io.color,
        summary=io.verbosity != QUIET,
    )
    if not checked.ok:
        return EXIT_INVALID
    if args.strict and any(not d.is_note for d in checked.diagnostics):
        return EXIT_FAILURE
    return EXIT_OK


def _say_skipped(skipped: Sequence[tuple[Path, str]], io: CommandIO) -> None:
    """The files of other kinds of ours a folder held that were not checked: how many of
    each kind (on standard error, unless `--quiet`), and under `--verbose` each one, what
    it is and what takes it, so a test or model script is never taken for a checked file."""
    from collections import Counter

    from converge_dsl._file_kinds import skipped_note

    if not skipped:
        return
    counts = Counter(kind for _, kind in skipped)
    each = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items()))
    more = "" if io.verbosity >= VERBOSE else "; --verbose names each and what takes it"
    io.note(f"skipped {len(skipped)} file(s) of other kinds ({each}){more}")
    for path, kind in skipped:
        named = _CHECKED_NAMED.get(kind)
        io.detail(skipped_note(str(path), kind) + (f" (validate checks {named})" if named else ""))


# The kinds validate checks in a folder only under their names (`_file_kinds.file_kind`).
_CHECKED_NAMED = {"Evaluation": "one named *.eval.yaml", "Pack": "a pack folder's pack.yaml"}
