"""`converge-dsl validate PATH... [--format human|json|github|sarif] [--strict]`.

PATH may be a file or a folder. In a folder, every `*.yaml`/`*.yml` file
(recursively) is validated as a pipeline, except the files that load and say
`kind: ModelScript` or `kind: Pack` at the top, or that load as a mapping with
neither `apiVersion` nor `kind` (not a converge-dsl file: a CI workflow); a
file that does not load, or has `apiVersion` and no or a misspelled `kind`, is
validated (so its errors are reported). A folder with no pipeline file is a
usage error.
Exit codes: 0 valid; 1 only warnings under `--strict`; 2 errors; 3 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path

from converge_dsl.cli import EXIT_FAILURE, EXIT_INVALID, EXIT_OK, CommandIO
from converge_dsl.errors import UsageError

FORMATS = ("human", "json", "github", "sarif")
OTHER_KINDS = frozenset({"ModelScript", "Pack"})


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
    """False only for a file that loads and is another converge-dsl kind, or none at all.

    Another kind: `kind` is `ModelScript` or `Pack` at the top. None at all: a
    mapping with neither `apiVersion` nor `kind` (a CI workflow, an old YAML
    cassette). Everything else, broken files included, is checked as a pipeline.
    """
    import yaml

    try:
        text = path.read_bytes().decode("utf-8-sig")
        if not any(word in text for word in ("ModelScript", "Pack", "apiVersion", "kind")):
            return False  # cannot name a kind or an API version: not ours
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, ValueError, RecursionError, yaml.YAMLError):
        return True
    if not isinstance(data, dict):
        return True
    if "kind" not in data and "apiVersion" not in data:
        return False
    return data.get("kind") not in OTHER_KINDS


def collect(paths: list[str]) -> list[Path]:
    """The pipeline files named by `paths` (folders expanded, sorted, de-duplicated).

    A folder with no pipeline file in it is a `UsageError`.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            inside = sorted(p for pattern in ("*.yaml", "*.yml") for p in path.rglob(pattern))
            chosen = [p for p in inside if p.is_file() and _is_pipeline(p)]
            if not chosen:
                raise UsageError(
                    f"no pipeline files found in {raw}",
                    hint="a folder is searched for *.yaml and *.yml pipeline files",
                )
            found.extend(chosen)
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
