"""Output-path checks: `--checkpoint`, `--record` and `--trace` are refused before any work.

Every output file is opened by the one opener (`_trace.open_output`, over
`converge_dsl._files.open_output`): never through a link, never over a file
that is not ours. Command-line outputs may lie anywhere the user names them
(the user's own word); files the pipeline names lie inside its folder or an
allowed root (`converge_dsl._files.referenced_path`).

An output may not be a file the run reads (the pipeline, a model script or
cassette named by the typed model declarations, a `--model`/`--replay`
cassette, the checkpoint), nor the other output.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from converge_dsl._files import same_file
from converge_dsl.compiler import ModelDeclaration
from converge_dsl.errors import UsageError

from ._checkpoint import CHECKPOINT_FILE, LOCK_FILE, check_folder
from ._options import RunOptions


def _read_files(
    models: Mapping[str, ModelDeclaration], options: RunOptions
) -> list[tuple[Path, str]]:
    """The files a run reads (never to be overwritten by an output): path and what it is."""
    found = [(options.pipeline, "the pipeline")]
    for name, declaration in models.items():
        found.extend(
            (path, f"the {field_name} of model {name!r}")
            for field_name, path in declaration.files.items()
        )
    found.extend(
        (Path(cassette), f"the cassette of --model {name}")
        for name, cassette in options.model_overrides.items()
    )
    if options.replay is not None:
        found.append((options.replay, "the --replay cassette"))
    if options.checkpoint is not None:
        found.append((options.checkpoint / CHECKPOINT_FILE, "the checkpoint file"))
    return found


def _check_checkpoint_folder(folder: Path, option: str) -> None:
    """A checkpoint folder is not a link, and an existing, non-empty one holds our files."""
    if folder.is_symlink():
        raise UsageError(
            f"{option} {str(folder)!r} is a symbolic link; checkpoints are never written "
            "through links",
            hint=f"give {option} the folder itself",
        )
    if not folder.is_dir():
        return  # missing (created) or a file (refused by `check_folder`)
    with contextlib.suppress(OSError):
        names = {entry.name for entry in os.scandir(folder)}
        if names and not names & {CHECKPOINT_FILE, LOCK_FILE}:
            raise UsageError(
                f"{option} {str(folder)!r} holds files and is not a checkpoint folder; "
                "nothing is written into it",
                hint=f"give {option} a new or empty folder, or one a run checkpointed into",
            )


def check_outputs(models: Mapping[str, ModelDeclaration], options: RunOptions) -> None:
    """Refuse unusable `--checkpoint` / `--record` / `--trace` paths before any work (`UsageError`).

    `models` are the pipeline's model declarations (`compiler.declare_models`).
    An output may not be a file the run reads (the pipeline, a model script or
    cassette, the checkpoint), nor the other output. Every output goes through
    `open_output` (no link followed; an existing file must be one we wrote:
    `--record` writes only to an empty file, or with `--overwrite` over a
    cassette, never appending to an older recording); `--trace` is opened,
    and truncated, when the `TraceWriter` is made. A `--checkpoint` folder may
    not be a link, and an existing, non-empty one must hold our files.
    """
    if options.checkpoint is not None:
        resuming = options.checkpoint == options.resume
        _check_checkpoint_folder(options.checkpoint, "--resume" if resuming else "--checkpoint")
        check_folder(
            options.checkpoint, "--resume" if resuming else "--checkpoint", create=not resuming
        )
    outputs = [(p, o) for p, o in ((options.trace, "--trace"), (options.record, "--record")) if p]
    if len(outputs) == 2 and same_file(outputs[0][0], outputs[1][0]):
        raise UsageError(
            f"--trace and --record name the same file {str(outputs[0][0])!r}",
            hint="give each its own file",
        )
    for path, option in outputs:
        for read, what in _read_files(models, options):
            if same_file(path, read):
                raise UsageError(
                    f"{option} {str(path)!r} is {what}; it would be overwritten",
                    hint=f"give {option} a file of its own (e.g. run.jsonl)",
                )
    if options.record is not None:
        if options.record.parent != Path():
            with contextlib.suppress(OSError):  # a missing parent: reported by the open below
                options.record.parent.mkdir(parents=True, exist_ok=True)
        _start_recording(options.record, overwrite=options.overwrite)


def _start_recording(path: Path, *, overwrite: bool) -> None:
    """Start the `--record` cassette empty: a recording already there is refused unless
    `overwrite` (appended to, its replay would answer from the older run too)."""
    from converge_dsl._files import open_output as open_checked
    from converge_dsl.models.cassette import is_cassette_line

    with open_checked(path, "--record", "cassette", recognise=is_cassette_line, append=True) as out:
        holds = out.seek(0, os.SEEK_END) > 0
    if holds and not overwrite:
        raise UsageError(
            f"--record {str(path)!r} already holds a recording; recording onto it would "
            "mix two runs",
            hint="add --overwrite to record afresh over it, or give --record a new file",
        )
    if holds:
        open_checked(path, "--record", "cassette", recognise=is_cassette_line, append=False).close()
