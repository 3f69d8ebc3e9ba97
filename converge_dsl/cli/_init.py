"""`converge-dsl init [DIR] [--name NAME]`: start a working project in DIR (default `.`).

Writes a pipeline (a seed, an llm suggestor on a scripted model, a rule, an
invariant), its model script, a test file, a `.pre-commit-config.yaml` using
converge-dsl's hooks and a README (`_init_files`). Right after it, `validate`,
`run`, `test` and `pytest` pass in DIR. It writes all or nothing: every
target is checked before any is written, and when any name is already taken
(a file, a folder, a link, even a dangling one) each is reported (CD962) and
nothing is written; a folder that cannot be written is refused first; a
write that fails anyway removes the files written before it.

Exit codes: 0 written; 1 a file is already there (nothing written); 3 usage
error (DIR is a file or cannot be written, NAME is not a valid pipeline name).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from pathlib import Path

from converge_dsl import codes
from converge_dsl.cli import EXIT_FAILURE, EXIT_OK, CommandIO
from converge_dsl.errors import UsageError

_NAME = re.compile(r"^[a-z0-9][a-z0-9-_.]*$")
_DEFAULT_NAME = "my-pipeline"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "dir",
        nargs="?",
        default=".",
        metavar="DIR",
        help="the project folder, made when missing (default: the working folder)",
    )
    parser.add_argument(
        "--name",
        help="the pipeline's name and file stem (default: the folder's name, "
        f"made a valid name, else {_DEFAULT_NAME})",
    )


def execute(args: argparse.Namespace, io: CommandIO) -> int:
    from converge_dsl._version import __version__
    from converge_dsl.cli._init_files import project_files

    folder = Path(args.dir)
    if folder.exists() and not folder.is_dir():
        raise UsageError(
            f"{args.dir} is not a folder",
            hint="give a folder to create the project in",
            code=codes.PATH_NOT_FOUND,
        )
    name = args.name if args.name is not None else _name_of(folder)
    if not _NAME.match(name):
        raise UsageError(
            f"{name!r} is not a valid pipeline name",
            hint="use lower-case letters, digits, '-', '_' and '.'; start with a letter or a digit",
            code=codes.ARGUMENTS_REFUSED,
        )
    files = project_files(name, __version__)
    # A dangling link, a folder, anything at a name counts: `lexists`, not `exists`.
    there = [relative for relative in files if os.path.lexists(folder / relative)]
    if there:
        _refuse(folder, there, io)
        return EXIT_FAILURE
    _check_writable(folder)
    _write_all_or_none(folder, files)
    from converge_dsl._escapes import shell_word

    # The folder's name is the user's text: quoted so that the line pastes into a shell,
    # its control characters escaped in the quoting so that none acts on the terminal.
    shown = shell_word(args.dir.rstrip("/") or ".")
    io.stdout.write(f"created {len(files)} files in {shown}:\n")
    for relative in files:
        io.stdout.write(f"  {relative}\n")
    io.stdout.write(
        f"next: cd {shown} && converge-dsl validate . && converge-dsl run {name}.yaml"
        " && converge-dsl test\n"
    )
    return EXIT_OK


def _check_writable(folder: Path) -> None:
    """`UsageError` unless `folder`, or the nearest folder above it that exists, is writable."""
    existing = folder
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(
            f"cannot write in {str(existing)!r}: it is not a folder you can write to; "
            "nothing was written",
            hint="init in a folder you can write to",
            code=codes.OUTPUT_REFUSED,
        )


def _write_all_or_none(folder: Path, files: dict[str, str]) -> None:
    """Write every file of `files` new (never over anything), or none of them.

    Each is created with `O_EXCL | O_NOFOLLOW` (`converge_dsl._files.create_new`),
    so a name taken since the check is not written through; on any failure the
    files written so far are removed and a `UsageError` says why.
    """
    from converge_dsl._files import create_new

    written: list[Path] = []
    made: list[Path] = []  # the sub-folders made for them (`.converge-dsl/schemas`...)
    path = folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for relative, text in files.items():
            path = folder / relative
            for parent in reversed(path.relative_to(folder).parents[:-1]):
                if not os.path.lexists(folder / parent):
                    (folder / parent).mkdir()
                    made.append(folder / parent)
            with os.fdopen(create_new(path), "w", encoding="utf-8") as handle:
                written.append(path)
                handle.write(text)
    except OSError as exc:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        for made_folder in reversed(made):
            with contextlib.suppress(OSError):
                made_folder.rmdir()
        raise UsageError(
            f"cannot write {str(path)!r}: {exc.strerror or exc}; nothing was written",
            hint="init in an empty folder you can write to",
            code=codes.OUTPUT_REFUSED,
        ) from None


def _name_of(folder: Path) -> str:
    """The folder's name made a valid pipeline name (`My Project` -> `my-project`)."""
    raw = folder.resolve().name.lower()
    name = re.sub(r"[^a-z0-9-_.]+", "-", raw).strip("-_.")
    return name if name and _NAME.match(name) else _DEFAULT_NAME


def _refuse(folder: Path, there: list[str], io: CommandIO) -> None:

    from converge_dsl._files import display_name
    from converge_dsl.cli._render import render
    from converge_dsl.diagnostics import Diagnostic, SourceSpan

    found = []
    for relative in there:
        shown = display_name(folder / relative)
        diagnostic = Diagnostic.at(
            codes.INIT_WOULD_OVERWRITE,
            f"{shown} is already there; init never overwrites a file",
            SourceSpan(shown, 1, 1, 1, 1),
            hint="init in an empty or new folder, or move the file away; nothing was written",
        )
        # No excerpt: the file is the user's, not ours to quote.
        found.append(diagnostic._replace(excerpt=False))
    render(found, "human", io.stderr, summary=False)
    io.stderr.write("nothing was written\n")
