"""`converge-dsl validate PATH... [--format human|json|github|sarif] [--strict]`.

PATH may be a file or a folder (every `*.yaml`/`*.yml` pipeline inside,
recursively; inside folders, a file counts as a pipeline when it says
`kind: Pipeline`, so model scripts, pack files and cassettes are skipped).
Exit codes: 0 valid; 1 only warnings under `--strict`; 2 errors; 3 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from pathlib import Path

from converge_dsl.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, CommandIO
from converge_dsl.errors import UsageError

FORMATS = ("human", "json", "github", "sarif")
_PIPELINE_KIND = re.compile(r"^kind:[ \t]*[\"']?Pipeline\b", re.MULTILINE)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="pipeline files or folders")
    parser.add_argument("--format", choices=FORMATS, default="human", help="output format")
    parser.add_argument("--strict", action="store_true", help="exit 1 when there are warnings")


def _display(path: Path) -> str:
    """The path as the user reads it: relative to the working folder when inside it."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _is_pipeline(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    return _PIPELINE_KIND.search(text) is not None


def collect(paths: list[str]) -> list[Path]:
    """The pipeline files named by `paths` (folders expanded, sorted, de-duplicated)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(p for pattern in ("*.yaml", "*.yml") for p in path.rglob(pattern))
            found.extend(p for p in inside if p.is_file() and _is_pipeline(p))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(
                f"no such file or folder: {raw}", hint="give pipeline files or folders"
            )
    unique: dict[Path, None] = dict.fromkeys(found)
    return list(unique)


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl.diagnostics import Diagnostic, best_first
    from converge_dsl.frontend import _render
    from converge_dsl.frontend._check import check_pipeline

    files = collect(args.paths)
    diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for path in files:
        name = path.as_posix() if not path.is_absolute() else _display(path)
        checked = check_pipeline(path, display=name)
        diagnostics.extend(checked.diagnostics)
        if checked.document is not None:
            sources[name] = checked.document.text
        elif checked.diagnostics:
            with contextlib.suppress(OSError):
                sources[name] = path.read_bytes().decode("utf-8", errors="replace")
    diagnostics = best_first(diagnostics)
    if args.format == "json":
        io.stdout.write(_render.render_json(diagnostics))
    elif args.format == "github":
        io.stdout.write(_render.render_github(diagnostics))
    elif args.format == "sarif":
        io.stdout.write(_render.render_sarif(diagnostics))
    else:
        text = _render.render_human(diagnostics, sources, io.color)
        io.stdout.write(
            text + ("\n" if text else "") + _render.summary_line(diagnostics, len(files))
        )
    if any(d.is_error for d in diagnostics):
        return EXIT_INVALID
    if diagnostics and args.strict:
        return EXIT_FAILURE
    return EXIT_OK
